"""A broker's registration: Kafka 2.x's `/brokers/ids/<id>` znode.

The JSON is Kafka's own (BrokerIdZNode, version 4), so its tools and
documentation read it: `host`/`port` are the PLAINTEXT endpoint's (null and
-1 without one), `endpoints` are `LISTENER://host:port`, `timestamp` is a
string of milliseconds, `rack` is present only when `broker.rack` is set.
The znode is ephemeral: it lives exactly as long as the broker's session.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

import attrs

from broker.coordination.store import CoordinationStore, NodeExistsError

BROKER_IDS_PATH = "/brokers/ids"
REGISTRATION_VERSION = 4


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{node_id}"


class MalformedZnode(ValueError):
    """A znode of Kafka's layout whose content is not Kafka's document."""


class DuplicateBrokerId(FileExistsError):
    """Another live broker holds this id (Kafka: NodeExistsException at registration).

    An OSError (EEXIST), so that the broker reports it in one line and exits non-zero
    as it does any resource it cannot take at start-up.
    """


@attrs.frozen
class BrokerEndpoint:
    listener_name: str
    security_protocol: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # Utils.formatAddress
        return f"{self.listener_name}://{host}:{self.port}"


@attrs.frozen
class BrokerRegistration:
    node_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    timestamp_ms: int = attrs.field(factory=lambda: int(time.time() * 1000))
    # The broker epoch (KIP-380): the czxid of the registration znode as read back; -1
    # before it is read. The controller refuses a ControlledShutdown from an older one.
    broker_epoch: int = -1

    def to_json(self) -> bytes:
        plaintext = next((e for e in self.endpoints if e.listener_name == "PLAINTEXT"), None)
        document: dict[str, object] = {
            "version": REGISTRATION_VERSION,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.url for e in self.endpoints],
            "listener_security_protocol_map": {
                e.listener_name: e.security_protocol for e in self.endpoints
            },
            "jmx_port": -1,
            "timestamp": str(self.timestamp_ms),
        }
        if self.rack is not None:
            document["rack"] = self.rack
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, node_id: int, data: bytes) -> BrokerRegistration:
        """Parse Kafka's document; MalformedZnode for anything else (another tool wrote it)."""
        try:
            return cls._parse(node_id, data)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise MalformedZnode(f"{broker_path(node_id)}: not a broker registration") from exc

    @classmethod
    def _parse(cls, node_id: int, data: bytes) -> BrokerRegistration:
        document = json.loads(data)
        protocols: Mapping[str, str] = document.get("listener_security_protocol_map") or {}
        endpoints = []
        for url in document.get("endpoints", []):
            name, _, address = str(url).partition("://")
            host, _, port = address.rpartition(":")
            endpoints.append(
                BrokerEndpoint(name, protocols.get(name, name), host.strip("[]"), int(port))
            )
        return cls(
            node_id=node_id,
            endpoints=tuple(endpoints),
            rack=None if document.get("rack") is None else str(document["rack"]),
            timestamp_ms=int(document.get("timestamp", 0)),
        )


async def register_broker(store: CoordinationStore, registration: BrokerRegistration) -> None:
    """Create this broker's ephemeral znode; a live broker with the same id refuses it."""
    path = broker_path(registration.node_id)
    try:
        await store.create(path, registration.to_json(), ephemeral=True)
    except NodeExistsError:
        raise DuplicateBrokerId(
            f"node.id {registration.node_id} is already registered at {path} by another"
            " live broker: give each broker its own node.id"
        ) from None
