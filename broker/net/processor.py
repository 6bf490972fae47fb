"""Processor: owns a set of connections; one of `num.network.threads` per listener.

Kafka's processor thread becomes a task with its own nursery: one child task per
connection (connection_task.py, around the sans-IO kafka_connection.py), the two
reapers (reapers.py), and the waiters of admission (admission.py) and of hang-ups.
The processor itself only keeps the register: it takes connections from the
acceptor, routes responses to them (`deliver`, called by the request channel), and
stops, drains or closes them.

Errors tied to one connection close that connection (and are logged); they never
escape the processor.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

import attrs
import trio

from broker.metrics import Meter, WindowedShare
from broker.net.admission import Admission, FirstRequest, NewConnection
from broker.net.channel_security import AuthMetrics, ListenerSecurity
from broker.net.connection import Connection
from broker.net.connection_quotas import ConnectionQuotas
from broker.net.connection_task import ConnectionTasks
from broker.net.kafka_connection import KafkaConnection
from broker.net.memory_pool import MemoryPool
from broker.net.processor_meters import BusyTime, ProcessorMeters
from broker.net.reapers import reap_idle_connections, reap_slow_senders
from broker.net.request import (
    ClientInformation,
    CloseConnectionResponse,
    NoOpResponse,
    RequestContext,
    Response,
    SendResponse,
)
from broker.net.request_channel import RequestChannel
from broker.net.request_metrics import RequestMetrics
from broker.net.socket_stream import FastSocketStream
from broker.protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

NEW_CONNECTION_QUEUE_SIZE = 20


@attrs.frozen
class ProcessorSettings:
    """The configuration a processor reads, resolved once per listener."""

    max_request_size: int
    idle_timeout_ms: int
    security: ListenerSecurity | None = None  # TLS / SASL; None for PLAINTEXT
    read_timeout_ms: int = -1
    send_buffer_bytes: int = -1  # SO_SNDBUF of accepted sockets; -1 keeps the OS default


class Processor:
    """One of `num.network.threads` processors of a listener."""

    def __init__(
        self,
        processor_id: int,
        settings: ProcessorSettings,
        channel: RequestChannel,
        quotas: ConnectionQuotas,
        memory_pool: MemoryPool,
        request_metrics: RequestMetrics,
        is_enabled: Callable[[int, int], bool],
        on_excess: Callable[[], None] = lambda: None,
        meters: ProcessorMeters | None = None,
    ) -> None:
        self.id = processor_id
        self._on_excess = on_excess
        self._settings = settings
        self._channel = channel
        self._quotas = quotas
        self._is_enabled = is_enabled
        self._metrics = request_metrics
        self._pool = memory_pool
        self.meters = meters if meters is not None else ProcessorMeters()
        self._new_send, self._new_receive = trio.open_memory_channel[NewConnection](
            NEW_CONNECTION_QUEUE_SIZE
        )
        channel.add_processor(processor_id, self.deliver, self.queued_responses)
        self.connections: dict[str, Connection] = {}
        self._index = 0
        self._nursery: trio.Nursery | None = None
        self._draining = False
        self._drained = trio.Event()
        self._scope = trio.CancelScope()
        self._busy = BusyTime()
        self._busy_share = WindowedShare()
        self._admission = Admission(
            max_request_size=settings.max_request_size,
            send_buffer_bytes=settings.send_buffer_bytes,
            screen=settings.security is None,
            pool=memory_pool,
            is_enabled=is_enabled,
            meters=self.meters,
            release=self._release_quota,
            keep=self._register,
            busy=self._busy,
        )
        self._tasks = ConnectionTasks(
            security=settings.security,
            pool=memory_pool,
            channel=channel,
            request_metrics=request_metrics,
            meters=self.meters,
            busy=self._busy,
            forget=self._forget,
        )

    # Kafka's meters of this processor (tests and the socket server read them).
    @property
    def connections_created(self) -> Meter:
        return self.meters.connections_created

    @property
    def connections_closed(self) -> Meter:
        return self.meters.connections_closed

    @property
    def auth_metrics(self) -> AuthMetrics:
        return self.meters.auth

    # -- hand-off from the acceptor ------------------------------------------
    def try_accept(self, connection: NewConnection) -> bool:
        """Take a connection without waiting; False when it cannot be taken now.

        A running processor takes it at once, in the caller's task: the hop through
        the new-connection queue (Kafka's, for a selector on another thread) would cost
        a task switch per connection. The queue is for a processor not yet running."""
        if self._nursery is not None:
            self._admission.admit(connection)
            return True
        try:
            self._new_send.send_nowait(connection)
        except trio.WouldBlock:
            return False
        except trio.ClosedResourceError:
            self._admission.drop(connection)  # stopped: nothing will ever serve it
        return True

    async def accept(self, connection: NewConnection) -> None:
        """Queue a connection, waiting for room."""
        await self._new_send.send(connection)

    # -- lifecycle --------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve connections until cancelled; every connection is closed on exit."""
        settings = self._settings
        with self._scope:
            try:
                async with trio.open_nursery() as nursery:
                    connections = self.connections.values
                    nursery.start_soon(reap_idle_connections, connections, settings.idle_timeout_ms)
                    nursery.start_soon(
                        reap_slow_senders,
                        connections,
                        settings.read_timeout_ms,
                        self.meters.read_timeouts,
                    )
                    nursery.start_soon(self._admission.run)
                    nursery.start_soon(self._tasks.watch_hang_ups)
                    self._nursery = nursery
                    task_status.started()
                    async for new in self._new_receive:
                        self._admission.admit(new)
                self._nursery = None
            finally:
                self._nursery = None
                self._admission.close()
                self._channel.remove_processor(self.id)
                self._drained.set()

    def shutdown(self) -> None:
        """Close every connection now (resize down, or shutdown deadline)."""
        self._scope.cancel()

    async def drain(self) -> None:
        """Stop reading new requests; return once in-flight ones are answered."""
        self._draining = True
        self._tasks.draining = True
        self._new_send.close()
        self._admission.close()
        for connection in list(self.connections.values()):
            if connection.in_flight is None:
                # Between requests: nothing to answer, stop reading now.
                connection.closing = True
                connection.scope.cancel()
        if not self.connections:
            self.shutdown()
        await self._drained.wait()

    # -- the register ---------------------------------------------------------------
    def _register(
        self,
        new: NewConnection,
        stream: FastSocketStream,
        decoder: FrameDecoder,
        first: FirstRequest | None,
    ) -> None:
        """Admission keeps the connection: its state, its task."""
        nursery = self._nursery
        assert nursery is not None
        local_ip, local_port = new.local_address[:2]
        remote_ip, remote_port = new.remote_address[:2]
        connection_id = f"{local_ip}:{local_port}-{remote_ip}:{remote_port}-{self.id}-{self._index}"
        self._index = 0 if self._index == 2**31 - 1 else self._index + 1
        context = RequestContext(
            connection_id=connection_id,
            processor_id=self.id,
            listener_name=new.listener_name,
            security_protocol=new.security_protocol,
            client_address=remote_ip,
            client_port=remote_port,
            client_information=ClientInformation(),
        )
        security = self._settings.security
        protocol = KafkaConnection(
            context,
            decoder,
            self._is_enabled,
            trio.current_time(),
            try_allocate=self._pool.try_allocate,
            read_timeout_s=self._settings.read_timeout_ms / 1000,
            sasl=None if security is None else security.new_authenticator(),
            sasl_max_receive=None if security is None else security.sasl_max_receive,
        )
        connection = Connection(
            protocol, stream, new.listener_name, (local_ip, local_port), (remote_ip, remote_port)
        )
        self.connections[connection_id] = connection
        self.meters.connections_created.mark()
        if first is not None:
            self._tasks.first_request(connection, first)
        nursery.start_soon(self._tasks.serve, connection)
        if self._quotas.max_connections_exceeded():
            # Only a protected listener admits past the broker-wide limit; the
            # socket server then closes an excess connection elsewhere (spec §3.5).
            self._on_excess()

    def _forget(self, connection: Connection) -> None:
        """A connection's task has closed it."""
        if self.connections.pop(connection.id, None) is None:
            return
        self._quotas.release(connection.listener_name, connection.remote_ip)
        self.meters.connections_closed.mark()
        if self._draining and not self.connections:
            self.shutdown()

    def _release_quota(self, new: NewConnection) -> None:
        self._quotas.release(new.listener_name, new.remote_address[0])

    def excess_candidate(self) -> Connection | None:
        """The connection this processor would close for excess: closing ones first,
        then the least recently active."""
        return min(
            self.connections.values(), key=lambda c: (not c.closing, c.last_active), default=None
        )

    @staticmethod
    def close_for_excess(connection: Connection) -> None:
        log.info("closing connection %s: broker max.connections exceeded", connection.id)
        connection.closing = True
        connection.scope.cancel()

    def deliver(self, response: Response) -> None:
        """Queue a response on its connection; responses for closed ones are dropped."""
        connection = self.connections.get(response.request.context.connection_id)
        if connection is None:
            if isinstance(response, (SendResponse, NoOpResponse, CloseConnectionResponse)):
                response.request.response_dequeue_ns = time.perf_counter_ns()
                self._metrics.record(response.request, response)
            return
        connection.responses_out.send_nowait(response)

    def queued_responses(self) -> int:
        """ResponseQueueSize for this processor: responses not yet taken by a connection."""
        return sum(
            c.responses_out.statistics().current_buffer_used for c in self.connections.values()
        )

    # -- metrics ------------------------------------------------------------
    def idle_fraction(self) -> float:
        """Share of about the last 30 s the processor spent not working; reading changes nothing."""
        return 1.0 - self._busy_share.share(self._busy.ns)

    def connection_count(self) -> int:
        return len(self.connections) + len(self._admission)


def idle_percent_mean(values: Sequence[float]) -> float:
    """NetworkProcessorAvgIdlePercent: 1.0 when there are no processors."""
    return math.fsum(values) / len(values) if values else 1.0
