"""Kafka's bootstrap-server lists, parsed once for everything that connects: `broker
client`'s `--bootstrap-server` and the pipeline's `kafka.bootstrap.servers` accept the
same forms, as users copy one list between them."""

from __future__ import annotations

DEFAULT_PORT = 9092


class BootstrapServersError(ValueError):
    """A bootstrap list that names no usable address; the message is one line."""


def parse_bootstrap_servers(value: str, option: str) -> list[tuple[str, int]]:
    """``host[:port][,host[:port]...]``, IPv6 as ``[addr]:port``; a missing port is
    Kafka's 9092 (as kcat takes `-b localhost`), an empty host 127.0.0.1. `option` names
    the setting in the error, as the user typed it."""
    addresses = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        if item.startswith("[") and "]" in item:  # [v6 address] or [v6 address]:port
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else rest or str(DEFAULT_PORT)
        elif item.count(":") == 1:
            host, _, port = item.partition(":")
        else:  # a name, a v4 address, or a bare v6 address: no port
            host, port = item, str(DEFAULT_PORT)
        if not port.isdigit() or int(port) > 65535:
            raise BootstrapServersError(f"bad {option} {value!r}: expected HOST[:PORT][,...]")
        addresses.append((host or "127.0.0.1", int(port)))
    if not addresses:
        raise BootstrapServersError(f"bad {option} {value!r}: expected HOST[:PORT][,...]")
    return addresses
