"""Validators of the key table: each raises ValueError with a message (without the
key, which the table adds) when a parsed value is invalid.

The data a validator checks against lives here too (the authorizer class names, the
listener protocol map's syntax), so that configuration depends on nothing above it:
the security and network layers read these names from config, not the other way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.config.endpoint import parse_protocol_map
from broker.config.errors import ConfigError
from broker.config.types import split_list

Validator = Callable[[Any], None]
"""Raises ValueError with a message (without the key) when a parsed value is invalid."""

AUTHORIZER_CLASS_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
"""Kafka's authorizer classes; either one turns this broker's authorizer on."""


def at_least(minimum: float) -> Validator:
    def check(value: Any) -> None:
        if value is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")

    return check


def between(low: float, high: float) -> Validator:
    def check(value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")

    return check


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> None:
        if value is not None and value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {value!r}")

    return check


def each_one_of(*choices: str) -> Validator:
    def check(value: Any) -> None:
        for item in value or ():
            if item not in choices:
                raise ValueError(f"entries must be among {', '.join(choices)}, got {item!r}")

    return check


def non_empty_list(value: Any) -> None:
    if value is not None and not value:
        raise ValueError("must not be empty")


def zookeeper_connect(value: Any) -> None:
    """host:port[,host:port...][/chroot], as Kafka's zookeeper.connect."""
    if value is None:
        return
    hosts = str(value).split("/", 1)[0]
    for entry in hosts.split(","):
        host, _, port = entry.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port[,host:port...][/chroot], got {value!r}")


def protocol_map(value: Any) -> None:
    try:
        parse_protocol_map(value or "")
    except ConfigError as exc:
        raise ValueError(str(exc).split(": ", 1)[1]) from None


def authorizer_class(value: Any) -> None:
    if value and value not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(
            f"unsupported authorizer {value!r}; use one of {', '.join(AUTHORIZER_CLASS_NAMES)}"
        )


def per_ip_overrides(value: Any) -> None:
    parse_ip_overrides(value or "")


def parse_ip_overrides(value: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host-or-ip:count,...`. The host part may
    itself contain colons (IPv6), so the count is taken after the last colon."""
    result: dict[str, int] = {}
    for entry in split_list(value):
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ValueError(f"entry {entry!r} is not of the form host:count")
        try:
            limit = int(count.strip())
        except ValueError:
            raise ValueError(f"entry {entry!r} has a non-integer count") from None
        if limit < 0:
            raise ValueError(f"entry {entry!r} has a negative count")
        result[host] = limit
    return result
