"""Kafka 2.x's entity-config znodes, encoded and decoded (ZkData's ConfigEntityZNode).

SCRAM credentials and client quotas of users and client ids live where Kafka 2.x keeps
them, so `kafka-configs.sh --zookeeper` and `zookeeper-shell` read and write them:

- `/config/users/<user>`, `/config/clients/<id>`, `/config/users/<user>/clients/<id>`:
  `{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096","producer_byte_rate":"1024"}}`
  (names URL-encoded as Kafka's Sanitizer does; `<default>` is the default entity)
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
from broker.security.scram_credentials import MECHANISM_BY_NAME, ScramCredential

CONFIG_PATH = "/config"
USERS_CONFIG_PATH = "/config/users"
CLIENTS_CONFIG_PATH = "/config/clients"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES_PATH}/config_change_"


def sanitize(name: str) -> str:
    """A user or client id as one path element (Kafka's Sanitizer: URL-encoding)."""
    return quote(name, safe="")


def desanitize(element: str) -> str:
    return unquote(element)


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
