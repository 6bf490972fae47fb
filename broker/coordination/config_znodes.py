"""Kafka 2.x's entity-config znodes, encoded and decoded (ZkData's ConfigEntityZNode).

SCRAM credentials and client quotas of users and client ids live where Kafka 2.x keeps
them, so `kafka-configs.sh --zookeeper` and `zookeeper-shell` read and write them:

- `/config/users/<user>`, `/config/clients/<id>`, `/config/users/<user>/clients/<id>`:
  `{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096","producer_byte_rate":"1024"}}`
  (names URL-encoded as Kafka's Sanitizer does; `<default>` is the default entity)
- `/config/brokers/<id>`, `/config/brokers/<default>`: dynamic broker configs, in the
  same document
- `/config/changes/config_change_<seq>`: `{"version":2,"entity_path":"users/alice"}`, so
  every broker re-reads the entity that changed.

A document another tool wrote badly raises MalformedZnode naming the path.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from urllib.parse import quote, unquote

from broker.coordination.broker_registration import MalformedZnode
from broker.quotas.client_quota_entity import (
    CLIENT_ID,
    CLIENT_KEYS,
    IP,
    IP_KEYS,
    USER,
    WHOLE_NUMBER_KEYS,
    ClientQuotaEntity,
)
from broker.security.scram_credentials import MECHANISM_BY_NAME, ScramCredential

CONFIG_PATH = "/config"
USERS_CONFIG_PATH = "/config/users"
CLIENTS_CONFIG_PATH = "/config/clients"
BROKERS_CONFIG_PATH = "/config/brokers"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_NAME = "config_change_"
CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_NAME}"
IPS_CONFIG_PATH = "/config/ips"
DEFAULT_ENTITY = "<default>"
"""The path element of a type's default entity (Kafka's ConfigEntityName.Default)."""
QUOTA_KEYS = frozenset((*CLIENT_KEYS, *IP_KEYS))
_ENTITY_DIRS = {USER: "users", CLIENT_ID: "clients", IP: "ips"}
_ENTITY_TYPES = {directory: entity_type for entity_type, directory in _ENTITY_DIRS.items()}


def sanitize(name: str) -> str:
    """A user or client id as one path element (Kafka's Sanitizer: URL-encoding)."""
    return quote(name, safe="")


def desanitize(element: str) -> str:
    return unquote(element)


def entity_path(entity: ClientQuotaEntity) -> str:
    """The entity's path under /config, as a change notification names it:
    `users/alice`, `clients/<default>`, `users/alice/clients/app`, `ips/10.0.0.1`."""
    order = sorted(entity.entries, key=lambda pair: pair[0] != USER)
    return "/".join(
        f"{_ENTITY_DIRS[entity_type]}/{DEFAULT_ENTITY if name is None else sanitize(name)}"
        for entity_type, name in order
    )


def entity_of(path: str) -> ClientQuotaEntity:
    """The inverse of `entity_path`; MalformedZnode for a path of no entity."""
    elements = path.strip("/").split("/")
    if not elements or len(elements) % 2 or len(elements) > 4:
        raise MalformedZnode(f"/config/{path}: not a client quota entity")
    pairs: list[tuple[str, str | None]] = []
    for directory, element in zip(elements[::2], elements[1::2], strict=True):
        entity_type = _ENTITY_TYPES.get(directory)
        if entity_type is None:
            raise MalformedZnode(f"/config/{path}: no entity type is called {directory!r}")
        pairs.append((entity_type, None if element == DEFAULT_ENTITY else desanitize(element)))
    return ClientQuotaEntity(tuple(sorted(pairs, key=lambda pair: pair[0])))


def encode_quota_value(key: str, value: float) -> str:
    """As `kafka-configs.sh` writes them: whole numbers for the byte and connection rates."""
    return str(int(value)) if key in WHOLE_NUMBER_KEYS else str(value)


def quota_values_in(path: str, config: Mapping[str, str]) -> dict[str, float]:
    """The client quotas of one entity's config (SCRAM credentials left out)."""
    try:
        return {key: float(value) for key, value in config.items() if key in QUOTA_KEYS}
    except ValueError as exc:
        raise MalformedZnode(f"{path}: a quota is not a number ({exc})") from None


def user_config_path(user: str) -> str:
    return f"{USERS_CONFIG_PATH}/{sanitize(user)}"


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(sorted(config.items()))}).encode()


def decode_entity_config(path: str, data: bytes) -> dict[str, str]:
    try:
        document = json.loads(data) if data else {"version": 1, "config": {}}
        config = document["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
        return {str(key): str(value) for key, value in config.items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedZnode(f"{path}: not an entity config ({exc!r})") from None


def encode_scram_credential(credential: ScramCredential) -> str:
    """Kafka's ScramCredentialUtils string form."""
    return ",".join(
        (
            f"salt={base64.b64encode(credential.salt).decode()}",
            f"stored_key={base64.b64encode(credential.stored_key).decode()}",
            f"server_key={base64.b64encode(credential.server_key).decode()}",
            f"iterations={credential.iterations}",
        )
    )


def decode_scram_credential(path: str, text: str) -> ScramCredential:
    try:
        fields = dict(part.split("=", 1) for part in text.split(","))
        return ScramCredential(
            base64.b64decode(fields["salt"], validate=True),
            base64.b64decode(fields["stored_key"], validate=True),
            base64.b64decode(fields["server_key"], validate=True),
            int(fields["iterations"]),
        )
    except (ValueError, KeyError, binascii.Error) as exc:
        raise MalformedZnode(f"{path}: not a SCRAM credential ({exc!r})") from None


def scram_credentials_in(path: str, config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials of one user's config, by mechanism (quotas left out)."""
    return {
        key: decode_scram_credential(path, value)
        for key, value in config.items()
        if key in MECHANISM_BY_NAME
    }


def encode_config_change(entity_path: str) -> bytes:
    """`entity_path` is relative to /config: `users/alice`, `clients/app`."""
    return json.dumps({"version": 2, "entity_path": entity_path}).encode()


def decode_config_change(path: str, data: bytes) -> str:
    try:
        document = json.loads(data)
        if document["version"] != 2:
            raise ValueError(f"version {document['version']}")
        return str(document["entity_path"])
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedZnode(f"{path}: not a config change notification ({exc!r})") from None
