"""A plain TCP connection as a `trio.abc.Stream`, with a fast path for ready bytes.

A connection task waits for its response between requests, so by the time it reads
again the next request has usually arrived, and a small response usually fits the
socket's send buffer whole. `trio.SocketStream` nevertheless passes every call
through the scheduler; here a read or write first tries the nonblocking socket with
one system call and waits in Trio only when the socket is not ready. The connection
task sees a Stream like any other (TLS wraps this one as its transport); the extra
methods are what a socket has and a TLS stream has not: the synchronous attempts
(`receive_nowait`, `send_nowait`, so that a request's common read and write cost no
coroutine), `receive_into` a frame's own buffer, the descriptor for the hang-up
watcher, the unread byte count, and the detach of a delayed close.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import termios

import trio

Buffer = bytes | bytearray | memoryview


class FastSocketStream(trio.abc.Stream):
    """`trio.SocketStream`, reading and writing without a scheduler trip when ready."""

    __slots__ = ("_fd", "_inner", "socket")

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self._inner = trio.SocketStream(sock)
        self.socket = sock
        self._fd = sock.fileno()

    def fileno(self) -> int:
        return self._fd

    def receive_nowait(self, max_bytes: int) -> bytes | None:
        """Bytes already waiting, read with one read(2) and no trip through the scheduler
        (nor a coroutine: this is a request's most common read); None when there are
        none yet (b"" at end of stream)."""
        try:
            return os.read(self._fd, max_bytes)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise trio.BrokenResourceError(exc) from exc

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """`receive_nowait`, waiting in Trio only when the socket has nothing to read."""
        data = self.receive_nowait(max_bytes or 65536)
        if data is not None:
            return data
        return await self.receive_after_wait(max_bytes or 65536)

    async def receive_after_wait(self, max_bytes: int) -> bytes:
        """For a caller that has just found nothing to read: wait until the socket is
        readable, then read (no second failed read(2) and its exception first)."""
        while True:
            await trio.lowlevel.wait_readable(self._fd)
            data = self.receive_nowait(max_bytes)
            if data is not None:
                return data

    async def receive_into(self, buffer: memoryview) -> int:
        """Read straight into `buffer` (a large frame's own), waiting for readability
        first; 0 at end of stream."""
        while True:
            try:
                return os.readv(self._fd, (buffer,))
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self._fd)
            except OSError as exc:
                raise trio.BrokenResourceError(exc) from exc

    def receive_into_nowait(self, buffer: memoryview) -> int | None:
        """Bytes already waiting, read straight into `buffer`; None when there are none
        yet (0 at end of stream)."""
        try:
            return os.readv(self._fd, (buffer,))
        except BlockingIOError:
            return None
        except OSError as exc:
            raise trio.BrokenResourceError(exc) from exc

    async def wait_readable(self) -> None:
        await trio.lowlevel.wait_readable(self._fd)

    def send_nowait(self, data: Buffer) -> int:
        """One write(2) straight to the socket: a small response usually goes whole,
        without a trip through the scheduler; returns how much was written."""
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(exc) from exc

    async def send_all(self, data: Buffer) -> None:
        """`send_nowait`, then Trio's send_all for what did not fit."""
        sent = self.send_nowait(data)
        if sent < len(data):
            await self._inner.send_all(memoryview(data)[sent:])

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close_now(self) -> None:
        """What aclose_forcefully does for a plain socket, without raising and catching
        a Cancelled: closes are what a flood of bad frames costs most."""
        self.socket.close()

    def unread_bytes(self) -> int:
        """Bytes the kernel holds for the socket, not yet read (FIONREAD)."""
        try:
            packed = fcntl.ioctl(self._fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return 0
        return int(struct.unpack("i", packed)[0])

    def detach(self) -> socket.socket:
        """Take the socket away from Trio and from this stream (whose close then does
        nothing): a delayed close finishes it later, outside any task."""
        trio.lowlevel.notify_closing(self.socket)
        sock = socket.socket(fileno=self.socket.detach())
        sock.setblocking(False)
        return sock


async def close_stream(stream: trio.abc.Stream) -> None:
    """Close a connection's stream now, whatever it is."""
    if isinstance(stream, FastSocketStream):
        stream.close_now()
    else:
        await trio.aclose_forcefully(stream)
