"""Acceptor: one per listener; admits connections and hands them to processors.

Admission follows Kafka (spec §3.4): wait for a free slot and the
connection-creation rate (blocking this listener's accepts), then count the
connection per IP and reject it at once when the IP is over its limit.
Hand-off is round-robin over the listener's processors, each with a bounded
queue of 20: every processor is offered the connection without waiting, and
only when all are full does the acceptor wait on the last one.

Kafka's acceptor is a thread of its own; here it shares one event loop with the
processors and handlers, and a flood of connections would take a turn in every
scheduler round, delaying the requests of established connections. So new
connections come after established work: one accept per round, and while other
tasks are waiting to run the acceptor lets up to `DEFERRED_ROUNDS` rounds go by
first (bounded, so that new connections are slowed, never starved). Trio counts as
runnable the tasks queued for the next round, not those later in the current one, so
this sees most, not all, of the established work.

Where the kernel offers it (Linux's TCP_DEFER_ACCEPT), a connection reaches accept() only
once its first bytes have arrived: Kafka clients speak first (ApiVersions, a TLS
ClientHello, a SASL handshake), so no client waits on it, and the processor's first read
then finds the first frame there instead of parking the connection until it comes
(first_bytes_waiter). A connection that says nothing is handed over anyway after about
`DEFER_ACCEPT_S`. Under a flood of bad frames, one per connection, this cut the broker's
CPU per frame from about 125 us to 80 us (docs/design/hostile-load.md).
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import time

import trio

from broker.metrics import Meter
from broker.net.admission import NewConnection
from broker.net.connection_quotas import ConnectionQuotas
from broker.net.endpoint import Endpoint
from broker.net.processor import Processor
from broker.net.run_queue import runnable_tasks

log = logging.getLogger(__name__)

# Out of file descriptors or kernel memory: the same answer as Trio's
# serve_listeners: log, back off briefly, keep the listener.
_OVERLOAD_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_OVERLOAD_SLEEP_S = 0.1
DEFERRED_ROUNDS = 3
"""Scheduler rounds the acceptor may let go by while other tasks are runnable."""
DEFER_ACCEPT_S = 1
"""TCP_DEFER_ACCEPT: how long a silent connection stays with the kernel at most (the
kernel rounds it up to its next SYN-ACK retransmission)."""


class Acceptor:
    """Owns a bound listening socket; runs until cancelled."""

    def __init__(
        self,
        endpoint: Endpoint,
        listen_socket: trio.socket.SocketType,
        processors: list[Processor],
        quotas: ConnectionQuotas,
        blocked_meter: Meter,
    ) -> None:
        self.endpoint = endpoint
        self._socket = listen_socket
        self.processors = processors
        self._quotas = quotas
        self._blocked = blocked_meter
        self._next = 0
        self._scope = trio.CancelScope()
        self._delayed_closes: trio.Nursery | None = None
        self._local = _specific_address(self._socket)

    @property
    def bound_port(self) -> int:
        return int(self._socket.getsockname()[1])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Accept until stopped; the listening socket is closed on exit."""
        with self._scope, self._socket:
            async with trio.open_nursery() as delayed_closes:
                self._delayed_closes = delayed_closes
                task_status.started()
                while True:
                    await defer_to_runnable_tasks()
                    await self._accept_one()

    def stop(self) -> None:
        self._scope.cancel()

    async def _accept_one(self) -> None:
        try:
            sock, peer = await self._socket.accept()
        except OSError as exc:
            if exc.errno in _OVERLOAD_ERRNOS:
                log.error(
                    "accept on %s failed (%s); sleeping %.1fs",
                    self.endpoint.listener_name,
                    errno.errorcode.get(exc.errno or 0, "?"),
                    _OVERLOAD_SLEEP_S,
                )
                await trio.sleep(_OVERLOAD_SLEEP_S)
                return
            raise
        listener = self.endpoint.listener_name
        try:
            started = time.perf_counter_ns()
            await self._quotas.wait_for_slot(listener)
            self._blocked.mark(time.perf_counter_ns() - started)
            # accept(2) already gave the peer; the local address is the listener's
            # unless it listens on a wildcard address.
            remote = peer if peer else sock.getpeername()
            local = self._local if self._local is not None else sock.getsockname()
        except OSError:
            sock.close()
            return
        except BaseException:
            sock.close()
            raise
        throttle_s = self._quotas.ip_connection_throttle_s(listener, remote[0])
        if throttle_s > 0 and self._delayed_closes is not None:
            log.debug("connection from %s over its connection_creation_rate", remote[0])
            self._delayed_closes.start_soon(_close_after, sock, throttle_s)
            return
        if not self._quotas.admit(listener, remote[0]):
            log.info("rejected connection from %s: max.connections.per.ip reached", remote[0])
            sock.close()
            return
        # Socket options are set by the processor, once it keeps the connection.
        connection = NewConnection(
            socket=sock,
            listener_name=listener,
            security_protocol=self.endpoint.security_protocol,
            local_address=(str(local[0]), int(local[1])),
            remote_address=(str(remote[0]), int(remote[1])),
        )
        await self._assign(connection)

    async def _assign(self, connection: NewConnection) -> None:
        """Round-robin, never waiting unless every processor's queue is full."""
        processors = self.processors
        count = len(processors)
        last = processors[self._next % count]
        for attempt in range(count):
            last = processors[(self._next + attempt) % count]
            if last.try_accept(connection):
                self._next = (self._next + attempt + 1) % count
                return
        started = time.perf_counter_ns()
        try:
            await last.accept(connection)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self._quotas.release(connection.listener_name, connection.remote_address[0])
            connection.socket.close()
        finally:
            self._blocked.mark(time.perf_counter_ns() - started)
        self._next = (self._next + count) % max(len(self.processors), 1)


def _specific_address(sock: trio.socket.SocketType) -> tuple[str, int] | None:
    """The listener's address when every accepted socket shares it (not a wildcard)."""
    try:
        host, port = sock.getsockname()[:2]
        if ipaddress.ip_address(host).is_unspecified:
            return None
    except (OSError, ValueError):
        return None
    return str(host), int(port)


async def defer_to_runnable_tasks() -> None:
    """Let up to DEFERRED_ROUNDS scheduler rounds go by while other tasks are runnable."""
    for _ in range(DEFERRED_ROUNDS):
        if not runnable_tasks():
            return
        await trio.lowlevel.checkpoint()


async def _close_after(sock: trio.socket.SocketType, delay_s: float) -> None:
    """Kafka's delayed close for a per-IP rate violation: open, never read, then closed."""
    with sock:
        await trio.sleep(delay_s)


def _defer_accept_until_data(sock: trio.socket.SocketType) -> None:
    """Hand connections to accept() with their first bytes, where the kernel can."""
    option = getattr(socket, "TCP_DEFER_ACCEPT", None)
    if option is not None:
        sock.setsockopt(socket.IPPROTO_TCP, option, DEFER_ACCEPT_S)


async def bind_listener(
    endpoint: Endpoint, backlog: int, receive_buffer_bytes: int
) -> trio.socket.SocketType:
    """Bind a listener's socket, SO_RCVBUF set before bind so accepted sockets inherit it.

    An empty host binds the wildcard address (dual-stack where IPv6 exists).
    Raises OSError with Kafka's message on failure; there is no retry.
    """
    host = endpoint.host
    try:
        if host == "":
            family = socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET
            address: tuple[str, int] = (
                "::" if family == socket.AF_INET6 else "0.0.0.0",
                endpoint.port,
            )
        else:
            infos = await trio.socket.getaddrinfo(
                host, endpoint.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            family, _, _, _, sockaddr = infos[0]
            address = (str(sockaddr[0]), int(sockaddr[1]))
        sock = trio.socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"Socket server failed to bind to {host}:{endpoint.port}: {exc.strerror or exc}",
        ) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host == "":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        if receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        await sock.bind(address)
        sock.listen(backlog)
        _defer_accept_until_data(sock)
    except OSError as exc:
        sock.close()
        raise OSError(
            exc.errno,
            f"Socket server failed to bind to {host}:{endpoint.port}: {exc.strerror or exc}",
        ) from exc
    return sock
