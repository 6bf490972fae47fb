"""The Trio task of one connection: moves bytes between its stream and its state machine.

Everything decided about a connection is decided by its `KafkaConnection`
(kafka_connection.py); this task only does what needs I/O or waiting: the TLS
handshake, reading (straight into a large frame's own buffer when the stream is a
socket), waiting for the memory pool, queueing a request and waiting for its
responses, writing, and the one close path. A connection task reads one frame, hands
the request to the request channel, then waits for its response before it reads
again, so pipelined requests are answered strictly in order and a slow request only
ever delays its own connection.

While a connection waits without reading (for the pool, or for an answer its handler
deferred), its socket is watched for the peer hanging up (hang_up_watcher), so a
client that went away is closed on our side too.
"""

from __future__ import annotations

import logging
import mmap
import time
from collections.abc import Callable, Sequence

import trio

from broker.net.admission import FirstRequest, log_invalid
from broker.net.bulk_turns import QUIET_TURN_S, TURN_S
from broker.net.channel_security import ListenerSecurity
from broker.net.connection import Connection
from broker.net.hang_up_watcher import AVAILABLE as hang_up_watch_available
from broker.net.hang_up_watcher import HangUpWatcher
from broker.net.kafka_connection import (
    ConnectionEvent,
    ConnectionState,
    IllegalConnectionState,
    NeedData,
    NeedMemory,
    RequestReceived,
    SaslAnswer,
)
from broker.net.log_limiter import LogLimiter
from broker.net.memory_pool import MemoryPool
from broker.net.mute_state import IllegalMuteTransition
from broker.net.processor_meters import BusyTime, ProcessorMeters
from broker.net.request import (
    Buffer,
    EndThrottlingResponse,
    Request,
    SendResponse,
    StartThrottlingResponse,
)
from broker.net.request_channel import RequestChannel
from broker.net.request_decoding import CloseConnection, UnsupportedApi
from broker.net.request_metrics import RequestMetrics
from broker.net.request_queue import SMALL_REQUEST_BYTES
from broker.net.socket_stream import FastSocketStream, close_stream
from broker.protocol.errors import DecodeError
from broker.protocol.framing import MAPPED_FRAME, MAX_RECEIVE, InvalidFrameSize

log = logging.getLogger(__name__)
# Closes a client can cause at will (bad frames, slow sends): rate-limited.
_client_closes = LogLimiter(log)

_RESPONDING = ConnectionState.RESPONDING  # a module constant: cheaper than the enum lookup
MAX_READ = MAX_RECEIVE
"""The most one read into a large frame takes (see `_receive`)."""
GIVE_BACK_TRIES = 10
GIVE_BACK_WAIT_S = 0.0005
"""How long an answered large frame's mapping is waited for while something else still
holds it (`_give_back_large_frame`): at most 10 times 0.5 ms."""

Forget = Callable[[Connection], None]
"""The processor's bookkeeping once a connection has closed."""


class ConnectionTasks:
    """What a processor's connection tasks share: the pool, the request channel, the
    meters, the hang-up watcher and the turn for large reads."""

    def __init__(
        self,
        *,
        security: ListenerSecurity | None,
        pool: MemoryPool,
        channel: RequestChannel,
        request_metrics: RequestMetrics,
        meters: ProcessorMeters,
        busy: BusyTime,
        forget: Forget,
    ) -> None:
        self._security = security
        self._pool = pool
        self._channel = channel
        self._metrics = request_metrics
        self._meters = meters
        self._busy = busy
        self.draining = False  # set by the processor: read no further requests
        self._now: Callable[[], float] = trio.current_time
        self._forget = forget
        self._bulk_turns = channel.bulk_turns
        self._hang_ups: HangUpWatcher[Connection] | None = (
            HangUpWatcher() if hang_up_watch_available else None
        )

    async def watch_hang_ups(self) -> None:
        """The hang-up watcher's task; until cancelled."""
        if self._hang_ups is not None:
            await self._hang_ups.run(self._peer_hung_up)

    def first_request(self, connection: Connection, first: FirstRequest) -> None:
        """A request decoded at screening becomes the connection's first."""
        connection.protocol.take_first_request(first.decoded)
        connection.first_request = self._request(
            connection, RequestReceived(first.decoded, first.frame, first.memory)
        )

    # -- the task ------------------------------------------------------------------------
    async def serve(self, connection: Connection) -> None:
        """Read, queue, await the response, write; until EOF, error or shutdown."""
        idle = False
        # The run's clock, called directly: trio.current_time() is three calls deep, and
        # a request needs the time twice (bytes received, response written).
        self._now = trio.lowlevel.current_clock().current_time
        try:
            with connection.scope:
                if not await self._establish(connection):
                    return
                while not self.draining:
                    ready = self._request_nowait(connection)
                    if isinstance(ready, Request):
                        request: Request | None = ready
                    else:
                        request = await self._read_request(connection, ready)
                    del ready  # the request (and its frame) is held by `request` alone
                    if request is None:
                        break
                    keep_serving = await self._dispatch(connection, request)
                    # Not kept alive (with its frame) while the next one is read.
                    del request
                    if connection.large_frame is not None:
                        await self._give_back_large_frame(connection)
                    if not keep_serving:
                        break
            idle = connection.scope.cancelled_caught and connection.expired
        except (InvalidFrameSize, DecodeError, UnsupportedApi) as exc:
            log_invalid(self._meters, connection.id, exc)
        except (CloseConnection, IllegalMuteTransition, IllegalConnectionState) as exc:
            _client_closes.log(logging.INFO, "closing connection %s: %s", connection.id, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("connection %s lost: %r", connection.id, exc)
        finally:
            await self._close(connection)
        if idle:
            log.info("closed idle connection %s", connection.id)

    async def _establish(self, connection: Connection) -> bool:
        """The TLS handshake, where the listener has TLS; False when it failed."""
        security = self._security
        if security is None or security.ssl_context is None:
            return True
        established = await security.tls_handshake(
            connection.stream, connection.id, self._meters.auth
        )
        if established is None:
            return False
        connection.stream = established.stream
        connection.protocol.touch(self._now())
        if established.principal is not None:
            connection.protocol.authenticated_as(established.principal)
        return True

    def _request_nowait(self, connection: Connection) -> Request | ConnectionEvent:
        """The next request when it needs no wait: one decoded at screening, or a frame
        already buffered or readable at once (most requests: one call, no coroutine);
        otherwise the event to carry on from (`_read_request`)."""
        first = connection.first_request
        if first is not None:
            connection.first_request = None
            return first
        protocol = connection.protocol
        # What is buffered already is looked at with the time the last answer was
        # written (`_dispatch`), a few µs ago: one clock call per request fewer.
        event = protocol.next_event(protocol.last_active)
        if type(event) is NeedData:
            ready = self._receive_nowait(connection, event.max_bytes)
            if ready is None:
                return event
            event = ready
        if type(event) is RequestReceived:
            return self._request(connection, event)
        return event

    async def _read_request(self, connection: Connection, event: ConnectionEvent) -> Request | None:
        """The next request for the API layer, from `event` on; None when the connection
        is done.

        A frame's bytes are admitted by the pool as soon as its size prefix is read,
        before its payload is buffered; while the pool makes it wait, the connection
        is not read, so the kernel pushes back on the client."""
        protocol = connection.protocol
        while True:
            match event:
                case NeedData():
                    event = await self._receive(connection, event.max_bytes)
                case RequestReceived():
                    return self._request(connection, event)
                case NeedMemory():
                    await self._wait_for_memory(connection, event.size)
                    event = protocol.grant_memory(self._now())
                case SaslAnswer():
                    await self._answer_sasl(connection, event)
                    if protocol.state is ConnectionState.CLOSED:
                        return None
                    event = protocol.next_event(self._now())
                case _:  # EndOfStream
                    return None

    async def _wait_for_memory(self, connection: Connection, size: int) -> None:
        """The pool could not admit the frame at once: wait, watching for a hang-up."""
        self._watch_hang_up(connection)
        try:
            await self._pool.allocate(size)
        finally:
            self._unwatch_hang_up(connection)

    def _receive_nowait(self, connection: Connection, max_bytes: int) -> ConnectionEvent | None:
        """Bytes a socket already holds between frames, without a coroutine (the most
        common read of a request); None when the read must wait or go into a frame."""
        stream = connection.stream
        if type(stream) is not FastSocketStream or connection.protocol.in_frame_buffer:
            return None
        data = stream.receive_nowait(max_bytes)
        if data is None:
            return None
        return connection.protocol.receive_data(data, self._now())

    async def _receive(self, connection: Connection, max_bytes: int) -> ConnectionEvent:
        """One read, once a read without waiting found nothing (`_receive_nowait`): into
        a frame's own buffer when one is in progress and the stream is a socket. Large
        frames are read in bulk turns (bulk_turns.py: one at a time, while the event
        loop has nothing else to run), so that a small request elsewhere never waits
        behind the flood's reads; the turn is taken only once bytes are there (a slow
        sender never holds it)."""
        protocol = connection.protocol
        stream = connection.stream
        space = protocol.frame_space(MAX_READ)
        if space is not None and isinstance(stream, FastSocketStream):
            if protocol.held_memory > SMALL_REQUEST_BYTES:
                del space
                # Bytes usually wait already (the client sends faster than one read
                # takes): a FIONREAD spares the trip through epoll that waiting costs.
                waited = not stream.unread_bytes()
                if waited:
                    await stream.wait_readable()
                turns = self._bulk_turns
                quiet = await turns.acquire(yielded=waited)
                try:
                    return self._read_in_turn(connection, stream, quiet)
                finally:
                    turns.release(quiet)
            count = await stream.receive_into(space)
            del space
            return protocol.received_into(count, self._now())
        if type(stream) is FastSocketStream:
            data: bytes | bytearray = await stream.receive_after_wait(max_bytes)
        else:
            data = await stream.receive_some(max_bytes)
        return protocol.receive_data(data, self._now())

    def _read_in_turn(
        self, connection: Connection, stream: FastSocketStream, quiet: bool = False
    ) -> ConnectionEvent:
        """Reads into the frame in progress for at most TURN_S (QUIET_TURN_S on a quiet
        loop), while its bytes are there: MAX_READ at a time, so that no single read
        holds the loop long."""
        protocol = connection.protocol
        ends = time.perf_counter() + (QUIET_TURN_S if quiet else TURN_S)
        event: ConnectionEvent = NeedData(MAX_READ)
        while True:
            space = protocol.frame_space(MAX_READ)
            if space is None:  # the frame is whole; the next one is read outside turns
                return event
            count = stream.receive_into_nowait(space)
            del space
            if count is None:  # nothing there after all: wait for it outside the turn
                return event
            event = protocol.received_into(count, self._now())
            if (
                type(event) is not NeedData
                or not count
                or time.perf_counter() >= ends
                or not stream.unread_bytes()
            ):
                return event

    def _request(self, connection: Connection, received: RequestReceived) -> Request:
        started = time.perf_counter_ns()
        decoded, memory = received.decoded, received.memory
        size_bytes = len(received.frame) - decoded.offset
        if size_bytes > SMALL_REQUEST_BYTES:
            connection.bulk_client = True
        elif not connection.bulk_client:
            self._bulk_turns.small_requests += 1  # someone for bulk turns to protect
        request = Request(
            header=decoded.header,
            body=decoded.body,
            context=connection.protocol.context,
            size_bytes=size_bytes,
            memory_bytes=memory,
            unsupported_version=decoded.unsupported,
            response_memory=self._pool.responses,
        )
        if memory:
            pool = self._pool
            frame = received.frame
            if (
                isinstance(frame, memoryview)
                and isinstance(frame.obj, mmap.mmap)
                and len(frame.obj) >= MAPPED_FRAME
            ):
                mapping = frame.obj
                request.release = lambda: self._large_frame_answered(connection, mapping, memory)
            else:
                request.release = lambda: pool.release(memory)
        if self._hang_ups is not None:
            request.on_deferred = lambda: self._watch_hang_up(connection)
        self._busy.ns += time.perf_counter_ns() - started
        return request

    @staticmethod
    def _large_frame_answered(connection: Connection, mapping: mmap.mmap, memory: int) -> None:
        """A frame with a mapping of its own is answered: `_give_back_large_frame`."""
        connection.large_frame = (mapping, memory)

    async def _give_back_large_frame(self, connection: Connection) -> None:
        """An answered frame's own mapping (MAPPED_FRAME and up) goes back to the pool's
        frame buffers, kept for the next large frame (a fresh one costs about 40 ms of
        CPU per 50 MB in page faults and unmapping) or unmapped in a worker thread, and
        then its bytes go back to the pool, which may admit the next frame at once.

        The last references to it go when this task next yields (Trio's runner holds
        the value that resumed it: the response, hence the request and its views), and
        once a worker thread that validated its batch has returned (the job's result,
        held until the thread next gets the GIL): it is waited for, a few milliseconds
        at most, rather than the next frame given a fresh mapping while this one is
        still there."""
        large, connection.large_frame = connection.large_frame, None
        assert large is not None
        mapping, memory = large
        del large
        buffers = self._pool.frame_buffers
        try:
            await trio.lowlevel.checkpoint()
            for _ in range(GIVE_BACK_TRIES):
                if buffers.released(mapping):
                    break
                await trio.sleep(GIVE_BACK_WAIT_S)
        finally:
            del mapping
            buffers.sweep(freeing=memory)
            self._pool.release(memory)

    async def _answer_sasl(self, connection: Connection, answer: SaslAnswer) -> None:
        security = self._security
        assert security is not None
        sasl = connection.protocol.sasl
        try:
            await security.carry_out(
                answer,
                connection.stream,
                lambda chunks: self._write(connection, chunks),
                connection.id,
                (connection.listener_name, connection.remote_ip),
                self._meters.auth,
                sasl is not None and not sasl.supports_reauthentication,
            )
        finally:
            if answer.memory:
                self._pool.release(answer.memory)

    async def _dispatch(self, connection: Connection, request: Request) -> bool:
        """Queue the request and serve its responses until the connection reads again.

        Returns False when the connection must close. The common request costs one
        coroutine here: queueing, the write and the bookkeeping are synchronous unless
        the queue is full or the socket does not take the response at once."""
        connection.in_flight = request
        channel = self._channel
        if not channel.send_request_nowait(request):
            await channel.send_request(request)
        protocol = connection.protocol
        while protocol.state is _RESPONDING:
            response = await connection.responses_in.receive()
            outgoing = protocol.send(response)
            if isinstance(response, (StartThrottlingResponse, EndThrottlingResponse)):
                continue  # a throttle notice: nothing to write or record
            answered = response.request
            answered.response_dequeue_ns = time.perf_counter_ns()
            if outgoing.close:
                self._metrics.record(answered, response)
                log.info("closing connection %s as the api layer asked", connection.id)
                return False
            if outgoing.chunks:
                unsent = self._write_nowait(connection, outgoing.chunks)
                if unsent:
                    await self._write_rest(connection, unsent)
            # Answered: the time the next read starts from too (`_request_nowait`).
            protocol.last_active = self._now()
            if type(response) is SendResponse and response.on_complete is not None:
                response.on_complete()
            self._metrics.record(answered, response)
        # The request's pool bytes cover it until its response is written: a client that
        # does not read its responses holds memory, and the pool counts it.
        request.release_memory()
        connection.in_flight = None
        if connection.hang_up_watched:
            self._unwatch_hang_up(connection)
        return True

    async def _write(self, connection: Connection, chunks: Sequence[Buffer]) -> None:
        unsent = self._write_nowait(connection, chunks)
        if unsent:
            await self._write_rest(connection, unsent)

    def _write_nowait(self, connection: Connection, chunks: Sequence[Buffer]) -> Sequence[Buffer]:
        """Write what the socket takes at once (most responses fit its buffer: written
        without a coroutine); returns what is left, empty when all went."""
        stream = connection.stream
        if type(stream) is not FastSocketStream:
            return chunks
        started = time.perf_counter_ns()
        unsent: Sequence[Buffer] = ()
        for index, chunk in enumerate(chunks):
            sent = stream.send_nowait(chunk)
            if sent < len(chunk):
                unsent = [memoryview(chunk)[sent:] if sent else chunk, *chunks[index + 1 :]]
                break
        self._busy.ns += time.perf_counter_ns() - started
        return unsent

    async def _write_rest(self, connection: Connection, chunks: Sequence[Buffer]) -> None:
        """What the socket did not take at once, through the stream's own wait."""
        started = time.perf_counter_ns()
        stream = connection.stream
        for chunk in chunks:
            await stream.send_all(chunk)
        self._busy.ns += time.perf_counter_ns() - started

    async def _close(self, connection: Connection) -> None:
        """The one close path: every way out of `serve` ends here."""
        connection.closing = True
        if connection.in_flight is not None:
            connection.in_flight.release_memory()
        if connection.first_request is not None:
            connection.first_request.release_memory()
        # Let go of the requests and the frame in progress, so that a large frame's
        # buffer may serve the next frame the pool admits with their bytes (unless a
        # handler still holds the request).
        connection.in_flight = connection.first_request = None
        held = connection.protocol.drop_frame()
        if connection.large_frame is not None:  # closed before its turn
            held += connection.large_frame[1]
            connection.large_frame = None
        if held:
            self._pool.frame_buffers.sweep(freeing=held)
            self._pool.release(held)
        connection.responses_out.close()
        self._unwatch_hang_up(connection)
        # Forgotten first: a response for it is dropped from now on.
        self._forget(connection)
        await close_stream(connection.stream)

    # -- a peer hanging up while its connection is not read (hang_up_watcher) ------
    def _watch_hang_up(self, connection: Connection) -> None:
        stream = connection.stream
        if self._hang_ups is not None and isinstance(stream, FastSocketStream):
            self._hang_ups.watch(stream.fileno(), connection)
            connection.hang_up_watched = True

    def _unwatch_hang_up(self, connection: Connection) -> None:
        stream = connection.stream
        if self._hang_ups is not None and isinstance(stream, FastSocketStream):
            self._hang_ups.unwatch(stream.fileno())
        connection.hang_up_watched = False

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
        stream = connection.stream
        unread = stream.unread_bytes() if isinstance(stream, FastSocketStream) else 0
        if reset or unread < connection.protocol.missing():
            log.debug("closing connection %s: the peer hung up", connection.id)
            connection.closing = True
            connection.scope.cancel()
