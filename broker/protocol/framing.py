"""Size-prefixed framing of the Kafka protocol, sans-IO.

Every request is a 4-byte big-endian signed length followed by that many
bytes. The decoder is fed whatever the socket returned and hands out one
complete frame at a time. It bounds what a connection buffers before the
memory pool has admitted a frame: the caller reads only `read_size()` bytes,
which is a small read-ahead (enough for a few small requests, or a size
prefix) until the frame's size is known, and then never more than the frame
still misses. A frame larger than what is already buffered gets its own
buffer, once the caller has admitted it (after `next_size()`, before
`next_frame()`); it is handed out without a copy, and bytes beyond it stay
in the kernel's socket buffer, which is what pushes back on a client that
pipelines large frames.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")

READ_AHEAD = 16384
"""Bytes read at a time while no frame is in progress: a few small requests, or the
size prefix and the start of a large one."""
MAX_RECEIVE = 1 << 18
"""The largest single read into a frame's buffer."""

Frame = bytes | memoryview


class InvalidFrameSize(Exception):
    """A negative size, or one above `socket.request.max.bytes`: Kafka closes the connection."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"invalid frame size {size} (socket.request.max.bytes={max_size})")
        self.size = size


class FrameDecoder:
    """Splits received bytes into frames; see the module docstring for the read protocol."""

    __slots__ = ("_buffer", "_frame", "_max_size", "_size", "_start")

    def __init__(self, max_size: int) -> None:
        self._buffer = bytearray()
        self._start = 0
        self._max_size = max_size
        self._frame: bytearray | None = None
        self._size = 0

    @property
    def max_size(self) -> int:
        return self._max_size

    @max_size.setter
    def max_size(self, value: int) -> None:
        """SASL caps frames lower until a connection has authenticated."""
        self._max_size = value

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out as a frame."""
        return len(self._buffer) - self._start + (0 if self._frame is None else len(self._frame))

    @property
    def held_bytes(self) -> int:
        """Bytes the decoder's buffers hold, taken or not (what it costs in memory)."""
        return len(self._buffer) + (0 if self._frame is None else len(self._frame))

    @property
    def in_frame(self) -> bool:
        """Whether part of a frame (its prefix included) has been received."""
        return self._frame is not None or len(self._buffer) > self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        frame = self._frame
        if frame is not None:
            if len(frame) + len(data) > self._size:
                raise ValueError("fed more bytes than read_size() asked for")
            frame += data
            return
        if self._start and self._start == len(self._buffer):
            self._buffer = bytearray()
            self._start = 0
        self._buffer += data

    def next_size(self) -> int | None:
        """The size of the next frame once its prefix has arrived; validates it."""
        if self._frame is not None:
            return self._size
        if len(self._buffer) - self._start < 4:
            return None
        size: int = _SIZE.unpack_from(self._buffer, self._start)[0]
        if size < 0 or size > self._max_size:
            raise InvalidFrameSize(size, self._max_size)
        return size

    def read_size(self) -> int:
        """How many bytes to ask the stream for next (never beyond a frame in progress)."""
        frame = self._frame
        if frame is not None:
            return min(self._size - len(frame), MAX_RECEIVE)
        return READ_AHEAD

    def missing(self) -> int:
        """How many more bytes the next frame needs (at least 1 when incomplete)."""
        size = self.next_size()
        if size is None:
            return 4 - self.buffered
        if self._frame is not None:
            return size - len(self._frame)
        return max(0, 4 + size - (len(self._buffer) - self._start))

    def next_frame(self) -> Frame | None:
        """Remove and return the next complete frame's payload, or None.

        Call it only once the frame's size (`next_size()`) has been admitted: a frame
        not yet wholly buffered gets its own buffer here."""
        frame = self._frame
        if frame is not None:
            if len(frame) < self._size:
                return None
            self._frame = None
            return memoryview(frame).toreadonly()
        size = self.next_size()
        if size is None:
            return None
        start = self._start + 4
        available = len(self._buffer) - start
        if available >= size:
            payload = bytes(self._buffer[start : start + size])
            if start + size == len(self._buffer):
                # All taken: an idle connection keeps no read-ahead buffer (up to
                # READ_AHEAD bytes each, outside the memory pool) between requests.
                self._buffer = bytearray()
                self._start = 0
            else:
                self._start = start + size
            return payload
        # Incomplete: what has arrived moves to the frame's own buffer, which grows as
        # bytes arrive (so a slow sender costs what it sent, not what it announced; a
        # large buffer grows in place, by mremap). The read buffer then holds nothing,
        # since reads stop at a frame's end.
        self._frame, self._size = self._buffer[start:], size
        self._buffer = bytearray()
        self._start = 0
        return None
