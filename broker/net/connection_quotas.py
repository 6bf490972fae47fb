"""Connection admission: Kafka's ConnectionQuotas (spec §3.4, helper for §3.5).

The order of checks and the choice between *blocking the acceptor* (broker and
listener limits) and *closing the socket* (per-IP limit) are what clients
observe, so they follow Kafka exactly: broker/listener limits leave new
connections in the kernel backlog, while a per-IP excess is refused at once.

The per-IP `connection_creation_rate` client quota (entity `ip`, set through
AlterClientQuotas) is checked between `wait_for_slot` and `admit`: a violation
holds the socket open unprocessed and closes it after the throttle time.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping

import trio

from broker.config import INT_MAX, BrokerConfig
from broker.config.settings import ListenerSettings
from broker.metrics import SampledRate

logger = logging.getLogger("broker.net.connection_quotas")


@functools.lru_cache(maxsize=4096)
def normalize_ip(ip: str) -> str:
    """Canonical text of an address so "::1" and "0:0::1" count as one client;
    IPv4-mapped IPv6 addresses count as their IPv4 address."""
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Kafka resolves override hosts once, when configured; a host that does not
    resolve is reported and skipped rather than failing the whole broker."""
    resolved: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            pass
        else:
            resolved[normalize_ip(host)] = limit
            continue
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError as exc:
            logger.warning(
                "max.connections.per.ip.overrides: cannot resolve %s (%s); ignored", host, exc
            )
            continue
        for info in infos:
            resolved[normalize_ip(str(info[4][0]))] = limit
    return resolved


class ConnectionQuotas:
    """Connection counts and limits shared by all acceptors and processors.

    Trio runs every acceptor on one thread, so Kafka's global lock reduces to
    not awaiting between a check and the update it guards.
    """

    def __init__(
        self, config: BrokerConfig, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self._clock = clock
        self._config = config
        self._window_s = float(config.quotas.window_size_seconds)
        self._window_num = config.quotas.window_num
        self._broker_rate = SampledRate(self._window_s, self._window_num, clock)
        self._listener_rates: dict[str, SampledRate] = {}
        self._listener_counts: dict[str, int] = {}
        self._ip_counts: dict[str, int] = {}
        self._total = 0
        self._overrides = _resolve_overrides(config.network.max_connections_per_ip_overrides)
        self._changed = trio.Event()
        self._ip_rate_quotas: dict[str | None, float] = {}
        self._ip_rates: dict[str, tuple[SampledRate, float]] = {}  # rate, bound
        # Limits as resolved from the config, read on every accept: looked up once per
        # config (a flood of connections paid several microseconds each for them).
        self._listener_limits: dict[str, ListenerSettings] = {}
        self._inter_broker_listener = config.network.inter_broker_listener_name

    # ---- configuration

    def add_listener(self, listener_name: str) -> None:
        name = listener_name.upper()
        if name in self._listener_counts:
            raise ValueError(f"listener {name} is already registered")
        self._listener_counts[name] = 0
        self._listener_rates[name] = SampledRate(self._window_s, self._window_num, self._clock)
        self._notify()

    def remove_listener(self, listener_name: str) -> None:
        name = listener_name.upper()
        self._listener_counts.pop(name, None)
        self._listener_rates.pop(name, None)
        self._notify()

    def update_config(self, config: BrokerConfig) -> None:
        """Apply new limits (dynamic config); blocked acceptors re-check at once."""
        self._config = config
        self._overrides = _resolve_overrides(config.network.max_connections_per_ip_overrides)
        self._listener_limits = {}
        self._inter_broker_listener = config.network.inter_broker_listener_name
        self._notify()

    def update_ip_connection_rate_quota(self, ip: str | None, rate: float | None) -> None:
        """Set or (None) remove the `connection_creation_rate` of an IP, or of every IP
        without its own (ip None). Sensors are made again for the new bounds."""
        key = None if ip is None else normalize_ip(ip)
        if rate is None:
            self._ip_rate_quotas.pop(key, None)
        else:
            self._ip_rate_quotas[key] = rate
        if key is None:
            self._ip_rates.clear()
        else:
            self._ip_rates.pop(key, None)

    def ip_connection_rate_quota(self, ip: str) -> float | None:
        address = normalize_ip(ip)
        return self._ip_rate_quotas.get(address, self._ip_rate_quotas.get(None))

    def ip_connection_throttle_s(self, listener_name: str, ip: str) -> float:
        """Record a new connection from `ip` against its connection-rate quota; when that
        is violated, the seconds to hold the socket before closing it (capped at one
        window), and the connection is taken back out of every rate sensor, as in
        Kafka. 0 when admitted."""
        if not self._ip_rate_quotas:
            return 0.0
        address = normalize_ip(ip)
        bound = self.ip_connection_rate_quota(address)
        if bound is None:
            return 0.0
        now = self._clock()
        sensor = self._ip_rates.get(address)
        if sensor is None or sensor[1] != bound:
            if len(self._ip_rates) > 10_000:
                self._ip_rates.clear()
            sensor = (SampledRate(self._window_s, self._window_num, self._clock), bound)
            self._ip_rates[address] = sensor
        rate = sensor[0]
        rate.record(1.0, now)
        delay = rate.throttle_time(bound, now)
        if delay <= 0:
            return 0.0
        rate.unrecord(1.0, now)
        name = listener_name.upper()
        if name in self._listener_rates:
            self._listener_rates[name].unrecord(1.0, now)
        if not self.is_protected(name):
            self._broker_rate.unrecord(1.0, now)
        return min(delay, self._window_s)

    # ---- queries

    def total_count(self) -> int:
        return self._total

    def listener_count(self, listener_name: str) -> int:
        return self._listener_counts.get(listener_name.upper(), 0)

    def ip_count(self, ip: str) -> int:
        return self._ip_counts.get(normalize_ip(ip), 0)

    def ip_limit(self, ip: str) -> int:
        return self._overrides.get(normalize_ip(ip), self._config.network.max_connections_per_ip)

    def is_protected(self, listener_name: str) -> bool:
        """The inter-broker listener is protected only when there is another
        listener it could be starved by."""
        return (
            listener_name.upper() == self._inter_broker_listener and len(self._listener_counts) > 1
        )

    def max_connections_exceeded(self, listener_name: str | None = None) -> bool:
        """Whether the broker total is above max.connections, which only a
        protected listener can cause; processors of non-protected listeners
        then close excess connections. With a protected `listener_name`,
        always False: its connections are not the ones to evict."""
        if listener_name is not None and self.is_protected(listener_name):
            return False
        return self._total > self._config.network.max_connections

    def _listener_max(self, name: str) -> int:
        return self._listener(name).max_connections

    def _listener(self, name: str) -> ListenerSettings:
        value = self._listener_limits.get(name)
        if value is None:
            value = self._listener_limits[name] = self._config.network.listener(name)
        return value

    def slot_available(self, listener_name: str) -> bool:
        name = self._known(listener_name)
        if self._listener_counts[name] >= self._listener_max(name):
            return False
        if self.is_protected(name):
            return True
        return self._total < self._config.network.max_connections

    def _known(self, listener_name: str) -> str:
        name = listener_name.upper()
        if name not in self._listener_counts:
            raise KeyError(f"listener {name} is not registered with the connection quotas")
        return name

    # ---- admission

    def _record_and_get_delay(self, name: str, now: float) -> float:
        """Record one connection in the listener (and, unless protected, broker)
        rate sensors and return the longest resulting delay, capped at one
        quota window as Kafka caps it."""
        delay = 0.0
        if not self.is_protected(name):
            self._broker_rate.record(1.0, now)
            bound = self._config.network.max_connection_creation_rate
            if bound < INT_MAX:  # the default, no limit: no need to measure the rate
                delay = self._broker_rate.throttle_time(bound, now)
        listener_rate = self._listener_rates[name]
        listener_rate.record(1.0, now)
        bound = self._listener(name).max_connection_creation_rate
        if bound < INT_MAX:
            delay = max(delay, listener_rate.throttle_time(bound, now))
        return min(delay, self._window_s)

    async def wait_for_slot(self, listener_name: str) -> float:
        """Block the calling acceptor until the creation-rate delay has passed and
        a connection slot is free; returns the seconds spent blocked (for
        AcceptorBlockedPercent). The connection is recorded in the rate sensors
        before waiting, as in Kafka, so a burst is spread out rather than
        re-measured."""
        name = self._known(listener_name)
        start = self._clock()
        delay = self._record_and_get_delay(name, start)
        if delay <= 0 and self.slot_available(name):
            return 0.0
        end = start + delay
        while True:
            remaining = end - self._clock()
            if remaining <= 0 and self.slot_available(name):
                break
            changed = self._changed
            if remaining > 0:
                with trio.move_on_after(remaining):
                    await changed.wait()
            else:
                await changed.wait()
        return self._clock() - start

    def admit(self, listener_name: str, ip: str) -> bool:
        """Count a new connection; False means the IP was already at its limit,
        the counts are back as they were and the caller closes the socket."""
        name = self._known(listener_name)
        address = normalize_ip(ip)
        before = self._ip_counts.get(address, 0)
        self._ip_counts[address] = before + 1
        self._listener_counts[name] += 1
        self._total += 1
        if before >= self.ip_limit(address):
            self.release(name, address)
            return False
        return True

    def release(self, listener_name: str, ip: str) -> None:
        """Uncount a closed connection; every close path of an admitted
        connection calls this exactly once."""
        name = listener_name.upper()
        address = normalize_ip(ip)
        count = self._ip_counts.get(address, 0)
        if count <= 0:
            raise ValueError(f"released a connection from {address}, which has none")
        if count == 1:
            del self._ip_counts[address]
        else:
            self._ip_counts[address] = count - 1
        self._total -= 1
        if name in self._listener_counts:
            self._listener_counts[name] -= 1
        else:
            logger.error("released a connection on unknown listener %s", name)
        self._notify()

    def _notify(self) -> None:
        # Only an acceptor blocked in wait_for_slot needs waking: no new Event for every
        # close of a flood of short connections.
        if self._changed.statistics().tasks_waiting:
            self._changed.set()
            self._changed = trio.Event()
