"""A processor's admission of new connections: first-bytes screening before registration.

On a plaintext listener the bytes already received are read first (see first_read):
a connection whose first frame is invalid, or that hung up before sending one, is
closed without a task, stream or registration; a valid first frame is decoded once,
here, and becomes the connection's first request. A connection without a whole first
frame yet waits for more bytes, once, with the others in the same state
(first_bytes_waiter). TLS and SASL listeners register every connection at once: their
first bytes are a handshake.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

import attrs
import trio

from broker.net.first_bytes_waiter import AVAILABLE as waiter_available
from broker.net.first_bytes_waiter import FirstBytesWaiter
from broker.net.first_read import FirstBytes, classify, read_nowait
from broker.net.log_limiter import LogLimiter
from broker.net.memory_pool import MemoryPool
from broker.net.processor_meters import BusyTime, ProcessorMeters
from broker.net.request_decoding import CloseConnection, Decoded, IsEnabled, decode_frame
from broker.net.socket_stream import FastSocketStream
from broker.protocol.errors import DecodeError
from broker.protocol.framing import READ_AHEAD, Frame, FrameDecoder, InvalidFrameSize

log = logging.getLogger(__name__)
# Closes a client can cause at will (bad frames): rate-limited.
_client_closes = LogLimiter(log)


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
class FirstRequest:
    """A first frame decoded at screening, with the pool bytes it holds."""

    frame: Frame
    memory: int
    decoded: Decoded


Keep = Callable[[NewConnection, FastSocketStream, FrameDecoder, FirstRequest | None], None]
"""The processor's registration of a connection it keeps."""
Release = Callable[[NewConnection], None]
"""The connection quota's release for a connection that goes."""


def log_invalid(meters: ProcessorMeters, peer: object, exc: Exception) -> None:
    """A connection closed for a frame Kafka closes it for: counted, logged rate-limited."""
    meters.invalid_request_closes.mark()
    level = logging.WARNING if isinstance(exc, InvalidFrameSize) else logging.INFO
    _client_closes.log(level, "closing connection %s: %s", peer, exc)


class Admission:
    """Screens a processor's new connections and hands the ones it keeps to `keep`."""

    def __init__(
        self,
        *,
        max_request_size: int,
        send_buffer_bytes: int,
        screen: bool,
        pool: MemoryPool,
        is_enabled: IsEnabled,
        meters: ProcessorMeters,
        release: Release,
        keep: Keep,
        busy: BusyTime,
    ) -> None:
        self._max_request_size = max_request_size
        self._send_buffer_bytes = send_buffer_bytes
        self._screening = screen
        self._pool = pool
        self._is_enabled = is_enabled
        self._meters = meters
        self._release = release
        self._keep = keep
        self._busy = busy
        self._open = True
        self._waiter: FirstBytesWaiter[tuple[NewConnection, FrameDecoder]] | None = (
            FirstBytesWaiter() if waiter_available and screen else None
        )

    def __len__(self) -> int:
        """Connections waiting for their first bytes."""
        return 0 if self._waiter is None else len(self._waiter)

    async def run(self) -> None:
        """Hand back connections whose first bytes arrived; until cancelled."""
        if self._waiter is not None:
            await self._waiter.run(self._first_bytes_arrived)

    def admit(self, new: NewConnection) -> None:
        """Register a new connection, unless what it has sent says to close it."""
        if not self._open:
            self.drop(new)
            return
        decoder = FrameDecoder(self._max_request_size, self._pool.frame_buffers)
        if self._screening:
            self._screen(new, decoder, self._waiter is not None)
        else:
            self._promote(new, decoder, None)

    def close(self) -> None:
        """Stop admitting (the processor drains or stops); waiting connections go."""
        self._open = False
        if self._waiter is not None:
            for new, _ in self._waiter.take_all():
                self.drop(new)

    def drop(self, new: NewConnection) -> None:
        new.socket.close()
        self._release(new)

    def _screen(self, new: NewConnection, decoder: FrameDecoder, may_wait: bool) -> None:
        started = time.perf_counter_ns()
        sock = new.socket
        first: FirstRequest | None = None
        try:
            data, eof = read_nowait(sock.fileno(), max(READ_AHEAD - decoder.buffered, 0))
            verdict = classify(decoder, data, eof)
            if verdict is FirstBytes.FRAME:
                # Decoded now; when the pool cannot take it at once, the
                # connection's task waits for the pool as for any frame.
                first = self._first_request(decoder)
        except (InvalidFrameSize, DecodeError, CloseConnection) as exc:
            self._reject(new, exc)
            return
        except Exception:
            # A bug in decoding: it runs in the acceptor's task, which must not die of it.
            log.exception("closing connection from %s: unexpected error", new.remote_address)
            self._reject(new, None)
            return
        finally:
            self._busy.ns += time.perf_counter_ns() - started
        if verdict is FirstBytes.HUNG_UP:
            self._reject(new, None)
        elif verdict is FirstBytes.SERVE and may_wait and self._waiter is not None:
            self._waiter.add(sock.fileno(), (new, decoder))
        else:
            self._promote(new, decoder, first)

    def _first_bytes_arrived(self, parked: tuple[NewConnection, FrameDecoder]) -> None:
        """The waiter's hand-back: screen again (without waiting again), or drop."""
        new, decoder = parked
        if not self._open:
            self.drop(new)
        else:
            self._screen(new, decoder, False)

    def _first_request(self, decoder: FrameDecoder) -> FirstRequest | None:
        """Take and decode the whole first frame, when the pool admits it at once
        (else the connection's task waits for the pool as for any frame)."""
        size = decoder.next_size()
        assert size is not None
        if not self._pool.try_allocate(size):
            return None
        try:
            frame = decoder.next_frame()
            assert frame is not None
            return FirstRequest(frame, size, decode_frame(frame, self._is_enabled))
        except BaseException:
            self._pool.release(size)
            raise

    def _promote(
        self, new: NewConnection, decoder: FrameDecoder, first: FirstRequest | None
    ) -> None:
        """Keep the connection: socket options, a stream, a task."""
        sock = new.socket
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if self._send_buffer_bytes != -1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
            stream = FastSocketStream(sock)
        except OSError as exc:
            log.debug("dropping connection from %s: %s", new.remote_address[0], exc)
            if first is not None:
                self._pool.release(first.memory)
            self._reject(new, None)
            return
        self._keep(new, stream, decoder, first)

    def _reject(self, new: NewConnection, reason: Exception | None) -> None:
        """Close a connection that was never registered (counted as created and closed)."""
        self._meters.connections_created.mark()
        if reason is not None:
            log_invalid(self._meters, new.remote_address, reason)
        # Never registered with Trio's I/O manager: a plain close(2), without Trio's
        # notify_closing (a flood of bad frames is a flood of closes).
        os.close(new.socket.detach())
        self._release(new)
        self._meters.connections_closed.mark()
