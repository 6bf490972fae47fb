"""A processor's two reapers: idle connections and slow senders.

Both check lazily, as Kafka's processor checks idle expiry: activity only stamps the
connection (`last_active`, the read deadline), and each reaper sleeps until the
earliest moment something could expire, instead of moving a timer on every read and
write. Times are Trio's (`trio.current_time()`), so tests run them on the mock clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio

from broker.metrics import Meter
from broker.net.connection import Connection
from broker.net.log_limiter import LogLimiter
from broker.net.read_deadline import overdue

log = logging.getLogger("broker.net.processor")
_client_closes = LogLimiter(log)

Connections = Callable[[], Iterable[Connection]]


async def reap_idle_connections(connections: Connections, idle_timeout_ms: int) -> None:
    """Close connections idle for `connections.max.idle.ms` (spec §3.6); never returns
    unless the timeout is negative (idle connections are then kept)."""
    if idle_timeout_ms < 0:
        return
    timeout = idle_timeout_ms / 1000
    while True:
        now = trio.current_time()
        next_expiry = now + timeout
        for connection in list(connections()):
            expires = connection.last_active + timeout
            if expires <= now:
                connection.expired = True
                connection.scope.cancel()
            else:
                next_expiry = min(next_expiry, expires)
        await trio.sleep_until(max(next_expiry, now + 0.001))


async def reap_slow_senders(connections: Connections, read_timeout_ms: int, killed: Meter) -> None:
    """Close connections whose request is not received whole within
    `socket.request.read.timeout.ms` of its first byte (see read_deadline)."""
    timeout_s = read_timeout_ms / 1000
    if timeout_s <= 0:
        return
    while True:
        now = trio.current_time()
        late, next_check = overdue(
            ((c, c.protocol.read_deadline) for c in connections()), now, timeout_s
        )
        for connection in late:
            connection.protocol.read_deadline.disarm()
            killed.mark()
            _client_closes.log(
                logging.INFO,
                "closing connection %s: request not received within "
                "socket.request.read.timeout.ms (%d ms)",
                connection.id,
                read_timeout_ms,
            )
            connection.scope.cancel()
        await trio.sleep_until(max(next_check, now + 0.001))
