"""Processor: owns a set of connections, reads requests and writes responses.

Kafka's processor thread becomes a task with its own nursery: one child task
per connection, plus one that closes idle connections. A connection task
reads one frame, hands the request to the request channel, then waits for
its response before it reads again, so pipelined requests are answered
strictly in order and a slow request only ever delays its own connection.
Responses reach a connection through `deliver`, which the request channel
calls for the processor that owns the connection.

Errors tied to one connection close that connection (and are logged); they
never escape the processor.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import re
import socket
import struct
import termios
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from broker.metrics import Meter, WindowedShare
from broker.net.channel_security import AuthMetrics, ConnectionIO, ListenerSecurity
from broker.net.connection import Connection
from broker.net.connection_quotas import ConnectionQuotas
from broker.net.first_bytes_waiter import AVAILABLE as waiter_available
from broker.net.first_bytes_waiter import FirstBytesWaiter
from broker.net.first_read import FirstBytes, classify, read_nowait
from broker.net.hang_up_watcher import AVAILABLE as hang_up_watch_available
from broker.net.hang_up_watcher import HangUpWatcher
from broker.net.log_limiter import LogLimiter
from broker.net.memory_pool import MemoryPool
from broker.net.mute_state import IllegalMuteTransition, MuteEvent, MuteState
from broker.net.read_deadline import overdue
from broker.net.request import (
    Buffer,
    ClientInformation,
    CloseConnectionResponse,
    EndThrottlingResponse,
    NoOpResponse,
    Request,
    RequestContext,
    Response,
    SendResponse,
    StartThrottlingResponse,
)
from broker.net.request_channel import RequestChannel
from broker.net.request_metrics import RequestMetrics
from broker.net.request_queue import SMALL_REQUEST_BYTES
from broker.protocol.api import ApiKey, RequestHeader, decode_request, decode_request_header
from broker.protocol.errors import DecodeError
from broker.protocol.framing import READ_AHEAD, Frame, FrameDecoder, InvalidFrameSize

log = logging.getLogger(__name__)
# Closes a client can cause at will (bad frames, slow sends): rate-limited.
_client_closes = LogLimiter(log)

API_VERSIONS_KEY = ApiKey.API_VERSIONS
NEW_CONNECTION_QUEUE_SIZE = 20
_COALESCE_LIMIT = 256 * 1024
MAX_READ = 64 * 1024
"""The most one read into a large frame takes (see _receive_large)."""
LARGE_READS = 1
"""Reads into large frames a processor does at once."""
_SOFTWARE_FIELD = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@attrs.frozen
class NewConnection:
    """An accepted, admitted connection on its way to a processor; its socket is
    configured and wrapped in a stream only once the processor keeps it."""

    socket: trio.socket.SocketType
    listener_name: str
    security_protocol: str
    local_address: tuple[str, int]
    remote_address: tuple[str, int]


@attrs.frozen
class ProcessorSettings:
    """The configuration a processor reads, resolved once per listener."""

    max_request_size: int
    idle_timeout_ms: int
    security: ListenerSecurity | None = None  # TLS / SASL; None for PLAINTEXT
    read_timeout_ms: int = -1
    send_buffer_bytes: int = -1  # SO_SNDBUF of accepted sockets; -1 keeps the OS default


class _CloseConnection(Exception):
    """Internal: stop serving this connection (already logged)."""


class _UnsupportedApi(_CloseConnection):
    """An api key or version the broker does not serve: Kafka closes the connection."""


Decoded = tuple[RequestHeader, Any, int, bool]
"""A request's header, body, the body's offset in its frame, and whether its version is
unsupported (an ApiVersions answered with v0, KIP-511)."""


def valid_client_software(value: str) -> bool:
    """KIP-511's rule for ApiVersions client software name and version."""
    return _SOFTWARE_FIELD.fullmatch(value) is not None


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
    ) -> None:
        self.id = processor_id
        self._on_excess = on_excess
        self._settings = settings
        self._channel = channel
        self._quotas = quotas
        self._pool = memory_pool
        self._metrics = request_metrics
        self._is_enabled = is_enabled
        self._new_send, self._new_receive = trio.open_memory_channel[NewConnection](
            NEW_CONNECTION_QUEUE_SIZE
        )
        channel.add_processor(processor_id, self.deliver, self.queued_responses)
        self.connections: dict[str, Connection] = {}
        self._index = 0
        self._nursery: trio.Nursery | None = None
        self._waiter: FirstBytesWaiter[tuple[NewConnection, FrameDecoder]] | None = (
            FirstBytesWaiter() if waiter_available and settings.security is None else None
        )
        self._hang_ups: HangUpWatcher[Connection] | None = (
            HangUpWatcher() if hang_up_watch_available else None
        )
        self._draining = False
        self._drained = trio.Event()
        self._scope = trio.CancelScope()
        self._busy_ns = 0  # cumulative
        self._busy_share = WindowedShare()
        # Replaced by the socket server with meters registered under Kafka's names.
        self.connections_created = Meter()
        self.connections_closed = Meter()
        self.auth_metrics = AuthMetrics()
        self._io = ConnectionIO(self._write, self._receive_frame, memory_pool.release)
        self.read_timeouts = Meter()
        self.invalid_request_closes = Meter()
        self._large_reads = trio.Semaphore(LARGE_READS)

    # -- hand-off from the acceptor ------------------------------------------
    def try_accept(self, connection: NewConnection) -> bool:
        """Take a connection without waiting; False when it cannot be taken now.

        A running processor takes it at once, in the caller's task: the hop through
        the new-connection queue (Kafka's, for a selector on another thread) would cost
        a task switch per connection. The queue is for a processor not yet running."""
        nursery = self._nursery
        if nursery is not None:
            self._admit(nursery, connection)
            return True
        try:
            self._new_send.send_nowait(connection)
        except trio.WouldBlock:
            return False
        except trio.ClosedResourceError:
            self._drop(connection)  # stopped: nothing will ever serve it
        return True

    async def accept(self, connection: NewConnection) -> None:
        """Queue a connection, waiting for room."""
        await self._new_send.send(connection)

    # -- lifecycle --------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve connections until cancelled; every connection is closed on exit."""
        with self._scope:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._reap_idle_connections)
                    nursery.start_soon(self._reap_slow_senders)
                    if self._waiter is not None:
                        nursery.start_soon(self._waiter.run, self._first_bytes_arrived)
                    if self._hang_ups is not None:
                        nursery.start_soon(self._hang_ups.run, self._peer_hung_up)
                    self._nursery = nursery
                    task_status.started()
                    async for new in self._new_receive:
                        self._admit(nursery, new)
                self._nursery = None
            finally:
                self._nursery = None
                self._drop_waiting()
                self._channel.remove_processor(self.id)
                self._drained.set()

    def shutdown(self) -> None:
        """Close every connection now (resize down, or shutdown deadline)."""
        self._scope.cancel()

    async def drain(self) -> None:
        """Stop reading new requests; return once in-flight ones are answered."""
        self._draining = True
        self._new_send.close()
        self._drop_waiting()
        for connection in list(self.connections.values()):
            if connection.in_flight is None:
                # Between requests: nothing to answer, stop reading now.
                connection.closing = True
                connection.scope.cancel()
        if not self.connections:
            self.shutdown()
        await self._drained.wait()

    # -- connections --------------------------------------------------------------
    def _admit(self, nursery: trio.Nursery, new: NewConnection) -> None:
        """Register a new connection, unless what it has sent says to close it.

        On a plaintext listener the bytes already received are read first (see
        first_read): a connection whose first frame is invalid, or that hung up
        before sending one, is closed without a task, stream or registration; a valid
        first frame is decoded once, here, and becomes the connection's first request.
        A connection without a whole first frame yet waits for more bytes, once, with
        the others in the same state (first_bytes_waiter).
        """
        if self._draining:
            self._drop(new)
            return
        decoder = FrameDecoder(self._settings.max_request_size)
        if self._settings.security is None:
            self._screen(nursery, new, decoder, self._waiter is not None)
        else:
            self._promote(nursery, new, decoder, None)

    def _screen(
        self, nursery: trio.Nursery, new: NewConnection, decoder: FrameDecoder, may_wait: bool
    ) -> None:
        started = time.perf_counter_ns()
        sock = new.socket
        first: tuple[Frame, int, Decoded] | None = None
        try:
            data, eof = read_nowait(sock.fileno(), max(READ_AHEAD - decoder.buffered, 0))
            verdict = classify(decoder, data, eof)
            if verdict is FirstBytes.FRAME:
                # Decoded now; when the pool cannot take it at once, the
                # connection's task waits for the pool as for any frame.
                first = self._first_request(decoder)
        except (InvalidFrameSize, DecodeError, _CloseConnection) as exc:
            self._reject(new, exc)
            return
        except Exception:
            # A bug in decoding: it runs in the acceptor's task, which must not die of it.
            log.exception("closing connection from %s: unexpected error", new.remote_address)
            self._reject(new, None)
            return
        finally:
            self._busy_ns += time.perf_counter_ns() - started
        if verdict is FirstBytes.HUNG_UP:
            self._reject(new, None)
        elif verdict is FirstBytes.SERVE and may_wait and self._waiter is not None:
            self._waiter.add(sock.fileno(), (new, decoder))
        else:
            self._promote(nursery, new, decoder, first)

    def _first_bytes_arrived(self, parked: tuple[NewConnection, FrameDecoder]) -> None:
        """The waiter's hand-back: screen again (without waiting again), or drop."""
        new, decoder = parked
        nursery = self._nursery
        if nursery is None or self._draining:
            self._drop(new)
        else:
            self._screen(nursery, new, decoder, False)

    def _drop(self, new: NewConnection) -> None:
        new.socket.close()
        self._quotas.release(new.listener_name, new.remote_address[0])

    def _drop_waiting(self) -> None:
        if self._waiter is not None:
            for new, _ in self._waiter.take_all():
                self._drop(new)

    def _promote(
        self,
        nursery: trio.Nursery,
        new: NewConnection,
        decoder: FrameDecoder,
        first: tuple[Frame, int, Decoded] | None,
    ) -> None:
        """Keep the connection: socket options, a stream, a task."""
        sock = new.socket
        try:
            self._configure(sock)
            stream = trio.SocketStream(sock)
        except OSError as exc:
            log.debug("dropping connection from %s: %s", new.remote_address[0], exc)
            if first is not None:
                self._pool.release(first[1])
            self._reject(new, None)
            return
        connection = self._register(nursery, new, stream, decoder)
        if first is not None:
            frame, memory, decoded = first
            connection.first_request = self._request(connection, frame, memory, decoded)

    def _first_request(self, decoder: FrameDecoder) -> tuple[Frame, int, Decoded] | None:
        """Take and decode the whole first frame, when the pool admits it at once
        (else the connection's task waits for the pool as for any frame)."""
        size = decoder.next_size()
        assert size is not None
        if not self._pool.try_allocate(size):
            return None
        try:
            frame = decoder.next_frame()
            assert frame is not None
            return frame, size, self._decode(frame)
        except BaseException:
            self._pool.release(size)
            raise

    def _reject(self, new: NewConnection, reason: Exception | None) -> None:
        """Close a connection that was never registered (counted as created and closed)."""
        self.connections_created.mark()
        if reason is not None:
            self._log_invalid(new.remote_address, reason)
        # Never registered with Trio's I/O manager: a plain close(2), without Trio's
        # notify_closing (a flood of bad frames is a flood of closes).
        os.close(new.socket.detach())
        self._quotas.release(new.listener_name, new.remote_address[0])
        self.connections_closed.mark()

    def _log_invalid(self, peer: object, exc: Exception) -> None:
        self.invalid_request_closes.mark()
        level = logging.WARNING if isinstance(exc, InvalidFrameSize) else logging.INFO
        _client_closes.log(level, "closing connection %s: %s", peer, exc)

    def _configure(self, sock: trio.socket.SocketType) -> None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if self._settings.send_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._settings.send_buffer_bytes)

    def _register(
        self,
        nursery: trio.Nursery,
        new: NewConnection,
        stream: trio.abc.Stream,
        decoder: FrameDecoder,
    ) -> Connection:
        local_ip, local_port = new.local_address[:2]
        remote_ip, remote_port = new.remote_address[:2]
        connection_id = f"{local_ip}:{local_port}-{remote_ip}:{remote_port}-{self.id}-{self._index}"
        self._index = 0 if self._index == 2**31 - 1 else self._index + 1
        connection = Connection(
            connection_id,
            stream,
            new.listener_name,
            (local_ip, local_port),
            (remote_ip, remote_port),
            self._settings.max_request_size,
            decoder,
        )
        connection.context = RequestContext(
            connection_id=connection_id,
            processor_id=self.id,
            listener_name=new.listener_name,
            security_protocol=new.security_protocol,
            client_address=remote_ip,
            client_port=remote_port,
            client_information=ClientInformation(),
        )
        self.connections[connection_id] = connection
        self.connections_created.mark()
        nursery.start_soon(self._serve, connection)
        if self._quotas.max_connections_exceeded():
            # Only a protected listener admits past the broker-wide limit; the
            # socket server then closes an excess connection elsewhere (spec §3.5).
            self._on_excess()
        return connection

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

    async def _serve(self, connection: Connection) -> None:
        """Read, queue, await the response, write; until EOF, error or shutdown."""
        idle = False
        security = self._settings.security
        try:
            with connection.scope:
                if security is not None and not await security.establish(
                    connection, self._io, self.auth_metrics
                ):
                    return
                while not self._draining:
                    sasl = connection.sasl
                    if sasl is not None and sasl.wants_raw_token:
                        if not await sasl.receive_raw_token():
                            break
                        continue
                    request = await self._read_request(connection)
                    if request is None:
                        break
                    if sasl is not None and not await sasl.screen(request):
                        if sasl.closing:
                            break
                        continue
                    keep_serving = await self._dispatch(connection, request)
                    # Not kept alive (with its frame) while the next one is read.
                    del request
                    if not keep_serving:
                        break
            idle = connection.scope.cancelled_caught and connection.expired
        except (InvalidFrameSize, DecodeError, _UnsupportedApi) as exc:
            self._log_invalid(connection.id, exc)
        except (_CloseConnection, IllegalMuteTransition) as exc:
            _client_closes.log(logging.INFO, "closing connection %s: %s", connection.id, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("connection %s lost: %r", connection.id, exc)
        finally:
            await self._close(connection)
        if idle:
            log.info("closed idle connection %s", connection.id)

    async def _read_request(self, connection: Connection) -> Request | None:
        """The next request of the connection, or None at end of stream."""
        first = connection.first_request
        if first is not None:
            connection.first_request = None
            return first
        frame_and_memory = await self._receive_frame(connection)
        if frame_and_memory is None:
            return None
        frame, memory = frame_and_memory
        started = time.perf_counter_ns()
        try:
            request = self._parse(connection, frame, memory)
        except BaseException:
            if memory:
                self._pool.release(memory)
            raise
        self._busy_ns += time.perf_counter_ns() - started
        return request

    async def _receive_frame(self, connection: Connection) -> tuple[Frame, int] | None:
        """One whole frame, with the memory-pool bytes it holds.

        The frame's bytes are admitted by the pool as soon as its size prefix is
        read, before its payload is buffered; while the pool makes it wait, the
        connection is not read (muted), so the kernel pushes back on the client.
        """
        decoder = connection.decoder
        deadline = connection.read_deadline
        timeout_s = self._settings.read_timeout_ms / 1000
        allocated = 0
        admitted = False
        try:
            while True:
                if not admitted:
                    size = decoder.next_size()
                    if size is not None:
                        if not self._pool.try_allocate(size):
                            deadline.disarm()
                            self._watch_hang_up(connection)
                            try:
                                await self._pool.allocate(size)
                            finally:
                                self._unwatch_hang_up(connection)
                        allocated, admitted = size, True
                frame = decoder.next_frame() if admitted else None
                if frame is not None:
                    deadline.disarm()
                    return frame, allocated
                if decoder.in_frame:
                    deadline.arm(time.monotonic(), timeout_s)
                if allocated > SMALL_REQUEST_BYTES:
                    data = await self._receive_large(connection.stream, decoder.read_size())
                else:
                    data = await _receive_some(connection.stream, decoder.read_size())
                if not data:
                    if allocated:
                        self._pool.release(allocated)
                    return None
                connection.touch()
                decoder.feed(data)
        except BaseException:
            if allocated:
                self._pool.release(allocated)
            raise

    async def _receive_large(self, stream: trio.abc.Stream, wanted: int) -> Buffer:
        """A read into a large frame, in turn with the processor's other large frames.

        Every connection reading a large frame at once would make each scheduler
        round as long as all their reads, and a small request on another connection
        waits a few rounds; so large frames are read one short read at a time per
        processor, and the turn is taken only once bytes are there (a slow sender
        never holds it)."""
        if type(stream) is trio.SocketStream:
            await trio.lowlevel.wait_readable(stream.socket)
            async with self._large_reads:
                return await stream.receive_some(min(wanted, MAX_READ))
        return await stream.receive_some(wanted)

    def _parse(self, connection: Connection, frame: Frame, memory: int) -> Request:
        return self._request(connection, frame, memory, self._decode(frame))

    def _decode(self, frame: Frame) -> Decoded:
        """Decode a frame, or raise what closes its connection (nothing else is touched)."""
        header, offset = decode_request_header(frame)
        api_key = header.api_key
        version = header.api_version
        if not self._is_enabled(api_key, version):
            if api_key == API_VERSIONS_KEY:
                # KIP-511: answer with a v0 body instead of closing.
                return header, None, offset, True
            raise _UnsupportedApi(f"unsupported api key {api_key} version {version}")
        return header, decode_request(header, frame, offset), offset, False

    def _request(
        self, connection: Connection, frame: Frame, memory: int, decoded: Decoded
    ) -> Request:
        header, body, offset, unsupported = decoded
        if header.api_key == API_VERSIONS_KEY and header.api_version >= 3 and not unsupported:
            self._record_client_information(connection, body)
        request = Request(
            header=header,
            body=body,
            context=connection.context,
            size_bytes=len(frame) - offset,
            memory_bytes=memory,
            unsupported_version=unsupported,
            response_memory=self._pool.responses,
        )
        if memory:
            pool = self._pool
            request.release = lambda: pool.release(memory)
        if self._hang_ups is not None:
            request.on_deferred = lambda: self._watch_hang_up(connection)
        return request

    @staticmethod
    def _record_client_information(connection: Connection, body: object) -> None:
        name = getattr(body, "client_software_name", "") or ""
        version = getattr(body, "client_software_version", "") or ""
        if valid_client_software(name) and valid_client_software(version):
            connection.client_information = ClientInformation(name, version)
            connection.context = attrs.evolve(
                connection.context, client_information=connection.client_information
            )

    async def _dispatch(self, connection: Connection, request: Request) -> bool:
        """Queue the request and serve its responses until the connection unmutes.

        Returns False when the connection must close.
        """
        connection.mute.mute()
        connection.in_flight = request
        await self._channel.send_request(request)
        connection.mute.handle_event(MuteEvent.REQUEST_RECEIVED)
        while connection.mute.state is not MuteState.NOT_MUTED:
            response = await connection.responses_in.receive()
            if not await self._apply(connection, response):
                return False
            connection.mute.maybe_unmute()
        # The request's pool bytes cover it until its response is written: a client that
        # does not read its responses holds memory, and the pool counts it.
        request.release_memory()
        connection.in_flight = None
        self._unwatch_hang_up(connection)
        return True

    async def _apply(self, connection: Connection, response: Response) -> bool:
        request = response.request
        if isinstance(response, SendResponse):
            request.response_dequeue_ns = time.perf_counter_ns()
            await self._write(connection, response.chunks)
            connection.touch()
            if response.on_complete is not None:
                response.on_complete()
            self._metrics.record(request, response)
            connection.mute.handle_event(MuteEvent.RESPONSE_SENT)
        elif isinstance(response, NoOpResponse):
            request.response_dequeue_ns = time.perf_counter_ns()
            self._metrics.record(request, response)
            connection.mute.handle_event(MuteEvent.RESPONSE_SENT)
        elif isinstance(response, CloseConnectionResponse):
            request.response_dequeue_ns = time.perf_counter_ns()
            self._metrics.record(request, response)
            log.info("closing connection %s as the api layer asked", connection.id)
            return False
        elif isinstance(response, StartThrottlingResponse):
            connection.mute.handle_event(MuteEvent.THROTTLE_STARTED)
        elif isinstance(response, EndThrottlingResponse):
            connection.mute.handle_event(MuteEvent.THROTTLE_ENDED)
        return True

    async def _write(self, connection: Connection, chunks: Sequence[Buffer]) -> None:
        """Write a response; small chunks are joined, large payloads sent as they are."""
        started = time.perf_counter_ns()
        stream = connection.stream
        if len(chunks) == 1:
            data = chunks[0]
            if type(stream) is trio.SocketStream:
                # One write(2) straight to the nonblocking socket: a small response
                # usually goes whole, without send_all's trip through the scheduler
                # (the connection yields anyway while it waits for its next response).
                try:
                    sent = os.write(stream.socket.fileno(), data)
                except BlockingIOError:
                    sent = 0
                if sent < len(data):
                    await stream.send_all(memoryview(data)[sent:])
            else:
                await stream.send_all(data)
        else:
            pending: list[Buffer] = []
            pending_size = 0
            for chunk in chunks:
                if len(chunk) >= _COALESCE_LIMIT:
                    if pending:
                        await stream.send_all(b"".join(pending))
                        pending, pending_size = [], 0
                    await stream.send_all(chunk)
                else:
                    pending.append(chunk)
                    pending_size += len(chunk)
            if pending:
                await stream.send_all(b"".join(pending))
        self._busy_ns += time.perf_counter_ns() - started

    async def _close(self, connection: Connection) -> None:
        """The one close path: every way out of `_serve` ends here."""
        if self.connections.pop(connection.id, None) is None:
            return
        connection.closing = True
        if connection.in_flight is not None:
            connection.in_flight.release_memory()
        if connection.first_request is not None:
            connection.first_request.release_memory()
        connection.responses_out.close()
        self._quotas.release(connection.listener_name, connection.remote_ip)
        self.connections_closed.mark()
        self._unwatch_hang_up(connection)
        stream = connection.stream
        if type(stream) is trio.SocketStream:
            # What aclose_forcefully does for a plain socket, without raising and
            # catching a Cancelled: closes are what a flood of bad frames costs most.
            stream.socket.close()
        else:
            await trio.aclose_forcefully(stream)
        if self._draining and not self.connections:
            self.shutdown()

    # -- a peer hanging up while its connection is not read (hang_up_watcher) ------
    def _watch_hang_up(self, connection: Connection) -> None:
        stream = connection.stream
        if self._hang_ups is not None and type(stream) is trio.SocketStream:
            self._hang_ups.watch(stream.socket.fileno(), connection)

    def _unwatch_hang_up(self, connection: Connection) -> None:
        stream = connection.stream
        if self._hang_ups is not None and type(stream) is trio.SocketStream:
            self._hang_ups.unwatch(stream.socket.fileno())

    def _peer_hung_up(self, connection: Connection, reset: bool) -> None:
        """The peer stopped sending while its connection waits. A request in flight is
        answered now if it can be (a long poll gives what it has): a peer that only
        half-closed still gets its answer, one that is gone makes the write or the next
        read fail, and either way the connection then closes. A frame waiting for pool
        memory that can no longer arrive whole, or a reset, closes it at once."""
        if connection.closing:
            return
        request = connection.in_flight
        if request is not None and not reset:
            if request.hurry is not None:
                request.hurry()
            return
        if reset or _unread_bytes(connection.stream) < connection.decoder.missing():
            log.debug("closing connection %s: the peer hung up", connection.id)
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

    async def _reap_idle_connections(self) -> None:
        """Close connections idle for `connections.max.idle.ms` (spec §3.6).

        Activity only stamps `last_active`; this task wakes when the least
        recently active connection would expire, as Kafka checks lazily,
        instead of moving a deadline on every read and write.
        """
        timeout = self._settings.idle_timeout_ms / 1000
        if self._settings.idle_timeout_ms < 0:
            return
        while True:
            now = time.monotonic()
            next_expiry = now + timeout
            for connection in list(self.connections.values()):
                expires = connection.last_active + timeout
                if expires <= now:
                    connection.expired = True
                    connection.scope.cancel()
                else:
                    next_expiry = min(next_expiry, expires)
            await trio.sleep(max(next_expiry - now, 0.001))

    async def _reap_slow_senders(self) -> None:
        """Close connections whose request is not received whole within
        `socket.request.read.timeout.ms` of its first byte (see read_deadline)."""
        timeout_s = self._settings.read_timeout_ms / 1000
        if timeout_s <= 0:
            return
        while True:
            now = time.monotonic()
            late, next_check = overdue(
                ((c, c.read_deadline) for c in self.connections.values()), now, timeout_s
            )
            for connection in late:
                connection.read_deadline.disarm()
                self.read_timeouts.mark()
                _client_closes.log(
                    logging.INFO,
                    "closing connection %s: request not received within "
                    "socket.request.read.timeout.ms (%d ms)",
                    connection.id,
                    self._settings.read_timeout_ms,
                )
                connection.scope.cancel()
            await trio.sleep(max(next_check - now, 0.001))

    # -- metrics ------------------------------------------------------------
    def idle_fraction(self) -> float:
        """Share of about the last 30 s the processor spent not working; reading changes nothing."""
        return 1.0 - self._busy_share.share(self._busy_ns)

    def connection_count(self) -> int:
        return len(self.connections) + (0 if self._waiter is None else len(self._waiter))


async def _receive_some(stream: trio.abc.Stream, max_bytes: int) -> bytes | bytearray:
    """`stream.receive_some`, but bytes already waiting on a plain socket are read with one
    read(2) and no trip through the scheduler (the connection yields while it waits for
    its response; only a socket with nothing to read waits in Trio)."""
    if type(stream) is trio.SocketStream:
        try:
            return os.read(stream.socket.fileno(), max_bytes)
        except BlockingIOError:
            pass
    return await stream.receive_some(max_bytes)


def _unread_bytes(stream: trio.abc.Stream) -> int:
    """Bytes the kernel holds for a plain socket, not yet read (FIONREAD)."""
    if type(stream) is not trio.SocketStream:
        return 0
    try:
        packed = fcntl.ioctl(stream.socket.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int(struct.unpack("i", packed)[0])


def idle_percent_mean(values: Sequence[float]) -> float:
    """NetworkProcessorAvgIdlePercent: 1.0 when there are no processors."""
    return math.fsum(values) / len(values) if values else 1.0
