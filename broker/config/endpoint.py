"""Listener endpoints: parsing of `listeners`, `advertised.listeners` and
`listener.security.protocol.map` exactly as Kafka accepts them (spec §1.1).

Part of configuration (the network binds what is parsed here), so that validating a
config never needs the network layer."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

import attrs

from broker.config.errors import ConfigError
from broker.config.types import split_list

# Kafka's EndPoint.uriParseExp; Scala's `case regex(...)` matches the whole string.
_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


@attrs.frozen
class Endpoint:
    """One listener endpoint. An empty host means "bind the wildcard address",
    which is why it is kept as "" rather than resolved here: binding and
    advertising treat the wildcard differently."""

    listener_name: str
    security_protocol: str
    host: str
    port: int

    @property
    def is_wildcard(self) -> bool:
        return self.host == ""

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.url()


def parse_protocol_map(value: str, key: str = "listener.security.protocol.map") -> dict[str, str]:
    """Parse `NAME:PROTOCOL,...`; names are normalised to upper case as Kafka's
    ListenerName.normalised does, so lookups by listener name are case-insensitive."""
    result: dict[str, str] = {}
    for entry in split_list(value):
        name, sep, protocol = entry.rpartition(":")
        name = name.strip().upper()
        protocol = protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ConfigError(f"{key}: entry {entry!r} is not of the form NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"{key}: unknown security protocol {protocol!r} for listener {name}; "
                f"expected one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if name in result:
            raise ConfigError(f"{key}: listener {name} is mapped more than once")
        result[name] = protocol
    return result


def parse_listeners(
    value: str, protocol_map: Mapping[str, str], key: str = "listeners"
) -> tuple[Endpoint, ...]:
    """Parse a `listeners`-style value. Uniqueness rules differ between
    `listeners` and `advertised.listeners`, so they are checked by the caller
    (see `validate_listener_uniqueness`)."""
    endpoints: list[Endpoint] = []
    for entry in split_list(value):
        match = _LISTENER_RE.fullmatch(entry)
        if match is None:
            raise ConfigError(f"{key}: unable to parse {entry!r} as a listener NAME://host:port")
        raw_name, host, raw_port = match.groups()
        name = raw_name.upper()
        if not name:
            raise ConfigError(f"{key}: listener {entry!r} has an empty name")
        port = int(raw_port)
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} of listener {name} is out of range 0..65535")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(
                f"{key}: no security protocol defined for listener {name} "
                "(add it to listener.security.protocol.map)"
            )
        endpoints.append(Endpoint(name, protocol, host, port))
    return tuple(endpoints)


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).version
    except ValueError:
        return None


def validate_listener_uniqueness(
    endpoints: tuple[Endpoint, ...], key: str = "listeners", check_ports: bool = True
) -> None:
    """Names must be unique; ports too, except port 0 (ephemeral) and one
    literal-IPv4 plus one literal-IPv6 listener sharing a port (dual stack)."""
    names = [e.listener_name for e in endpoints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(
            f"{key}: each listener must have a different name, duplicated: {duplicates}"
        )
    if not check_ports:
        return
    by_port: dict[int, list[Endpoint]] = {}
    for endpoint in endpoints:
        if endpoint.port != 0:
            by_port.setdefault(endpoint.port, []).append(endpoint)
    for port, group in sorted(by_port.items()):
        if len(group) == 1:
            continue
        versions = sorted(v for v in (_ip_version(e.host) for e in group) if v is not None)
        if len(group) == 2 and versions == [4, 6]:
            continue
        raise ConfigError(
            f"{key}: each listener must have a different port unless exactly one "
            f"is IPv4 and the other IPv6; port {port} is used by "
            f"{', '.join(e.url() for e in group)}"
        )
