"""Which ports each process of a cluster binds and advertises (docs/cluster.md).

By default process *i* takes each listener's port + *i*. That is a trap with two
listeners on neighbouring ports (INTERNAL 9092 and EXTERNAL 9093 under three processes
would both want 9093), and no help when the ports a platform publishes are elsewhere.
`process.listener.ports` (and `process.advertised.listener.ports` for what clients are
told) give a listener an explicit range instead: `EXTERNAL:19092-19095` hands process
*i* the *i*-th port of the range. Pure functions over the parsed settings, so the
supervisor checks the whole plan before any process starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from broker.config import BrokerConfig
from broker.config_error import ConfigError
from broker.net.endpoint import Endpoint


def parse_port_ranges(entries: Sequence[str], key: str) -> dict[str, range]:
    """`NAME:FIRST-LAST` (or `NAME:PORT` for one port) per entry; names are upper-cased
    as Kafka's listener names are. Raises ConfigError naming `key` for a bad entry."""
    ranges: dict[str, range] = {}
    for entry in entries:
        name, sep, span = entry.rpartition(":")
        name = name.strip().upper()
        first, dash, last = span.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            low = high = -1
        if not sep or not name or not 0 < low <= high <= 65535:
            raise ConfigError(
                f"{key}: entry {entry!r} is not of the form NAME:FIRST-LAST with ports 1-65535"
            )
        if name in ranges:
            raise ConfigError(f"{key}: listener {name} is given more than once")
        ranges[name] = range(low, high + 1)
    return ranges


def check_port_ranges(
    ranges: Mapping[str, range], endpoints: Sequence[Endpoint], count: int, key: str
) -> None:
    """Every range names a listener of `endpoints` and holds a port for each process."""
    names = {e.listener_name for e in endpoints}
    for name, ports in ranges.items():
        if name not in names:
            raise ConfigError(f"{key}: {name} is not a listener ({', '.join(sorted(names))})")
        if len(ports) < count:
            raise ConfigError(
                f"{key}: {name} has {len(ports)} port(s) for {count} processes "
                f"({ports.start}-{ports.stop - 1})"
            )


def process_endpoints(
    endpoints: Sequence[Endpoint], ranges: Mapping[str, range], index: int
) -> tuple[Endpoint, ...]:
    """The endpoints of process `index`: its port of an explicit range, else the
    listener's port + `index`; port 0 stays ephemeral (each process binds its own)."""
    return tuple(
        Endpoint(
            e.listener_name,
            e.security_protocol,
            e.host,
            _port_of(e, ranges.get(e.listener_name), index),
        )
        for e in endpoints
    )


def _port_of(endpoint: Endpoint, ports: range | None, index: int) -> int:
    if ports is not None:
        return ports[index]
    return endpoint.port + index if endpoint.port > 0 else endpoint.port


def check_bind_ports_distinct(
    endpoints: Sequence[Endpoint], ranges: Mapping[str, range], count: int
) -> None:
    """No two listeners of any processes bind one fixed port (on overlapping hosts), so a
    plan such as INTERNAL 9092 + EXTERNAL 9093 under several processes fails start-up
    with the fix named, rather than with one process's bind error."""
    taken: dict[int, list[tuple[int, Endpoint]]] = {}
    for index in range(count):
        for endpoint in process_endpoints(endpoints, ranges, index):
            if endpoint.port == 0:
                continue
            for other_index, other in taken.get(endpoint.port, []):
                if _hosts_overlap(endpoint.host, other.host):
                    raise ConfigError(
                        f"listeners: port {endpoint.port} would be bound twice, by "
                        f"{other.listener_name} of process {other_index} and "
                        f"{endpoint.listener_name} of process {index}; space the "
                        "listeners' ports at least process.count apart or give them "
                        "explicit ranges in process.listener.ports"
                    )
            taken.setdefault(endpoint.port, []).append((index, endpoint))


def check_metrics_port_apart(
    endpoints: Sequence[Endpoint], ranges: Mapping[str, range], count: int, metrics_port: int
) -> None:
    """`metrics.port` (the supervisor's alone, bound on the first listener's host) is no
    process's listener port, so the clash fails start-up naming the keys rather than
    leaving the cluster without /metrics (a busy metrics port is only logged)."""
    if metrics_port <= 0 or not endpoints:
        return
    host = endpoints[0].host
    for index in range(count):
        for endpoint in process_endpoints(endpoints, ranges, index):
            if endpoint.port == metrics_port and _hosts_overlap(host, endpoint.host):
                raise ConfigError(
                    f"metrics.port: port {metrics_port} would be bound twice, by /metrics and "
                    f"by listener {endpoint.listener_name} of process {index} (listeners: "
                    "process i binds each listener's port + i, or its port of "
                    "process.listener.ports); choose a metrics.port outside those ports"
                )


def _hosts_overlap(one: str, other: str) -> bool:
    wildcard = ("", "0.0.0.0", "::")
    return one == other or one in wildcard or other in wildcard


LISTENER_PORTS = "process.listener.ports"
ADVERTISED_PORTS = "process.advertised.listener.ports"


def check_process_ports(config: BrokerConfig, count: int) -> None:
    """The whole port plan of `count` processes is sound (raises ConfigError): each
    listener's ports, the advertised ranges, and `metrics.port` apart from them."""
    if count <= 1:
        check_metrics_port_apart(config.listeners, {}, 1, config.server.metrics_port)
        return
    ranges = parse_port_ranges(list(config.cluster.process_listener_ports), LISTENER_PORTS)
    check_port_ranges(ranges, config.listeners, count, LISTENER_PORTS)
    check_bind_ports_distinct(config.listeners, ranges, count)
    check_metrics_port_apart(config.listeners, ranges, count, config.server.metrics_port)
    advertised = parse_port_ranges(
        list(config.cluster.process_advertised_listener_ports), ADVERTISED_PORTS
    )
    check_port_ranges(advertised, config.advertised_listeners, count, ADVERTISED_PORTS)


def process_listener_overrides(config: BrokerConfig, index: int) -> dict[str, str]:
    """`listeners` and, where it differs from following them, `advertised.listeners` of
    process `index`."""
    ranges = parse_port_ranges(list(config.cluster.process_listener_ports), LISTENER_PORTS)
    advertised = parse_port_ranges(
        list(config.cluster.process_advertised_listener_ports), ADVERTISED_PORTS
    )
    overrides = {"listeners": _urls(process_endpoints(config.listeners, ranges, index))}
    if config.cluster.advertised_listeners is not None:
        overrides["advertised.listeners"] = _urls(
            process_endpoints(config.advertised_listeners, advertised, index)
        )
    elif advertised:
        # Following `listeners` (the same endpoints), except the ranged advertised ports.
        overrides["advertised.listeners"] = _urls(
            process_endpoints(config.listeners, {**ranges, **advertised}, index)
        )
    return overrides


def _urls(endpoints: Sequence[Endpoint]) -> str:
    return ",".join(e.url() for e in endpoints)
