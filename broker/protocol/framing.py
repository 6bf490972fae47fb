"""Size-prefixed framing of the Kafka protocol, sans-IO.

Every request is a 4-byte big-endian signed length followed by that many
bytes. The decoder is fed whatever the socket returned and hands out one
complete frame at a time. It bounds what a connection buffers before the
memory pool has admitted a frame: the caller reads only `read_size()` bytes,
which is a small read-ahead (enough for a few small requests, or a size
prefix) until the frame's size is known, and then never more than the frame
still misses. A frame larger than what is already buffered gets its own
buffer, once the caller has admitted it (after `next_size()`, before
`next_frame()`), allocated at the frame's size: a caller can read straight into it
(`frame_space()` and `advance()`, for `recv_into`) instead of feeding pieces that are
appended to a growing buffer. It is handed out without a copy, and bytes beyond it
stay in the kernel's socket buffer, which is what pushes back on a client that
pipelines large frames. Frames below `MAPPED_FRAME` get a bytearray, from the
allocator's reused memory (a fresh mapping per frame made the kernel fault in every
page of every produce request), or, given `FrameBuffers` (the broker's), from
`POOLED_FRAME` up a reused mapping that is given back to the kernel once no longer
needed (frame_buffers.py); a larger one gets an anonymous mapping, whose pages the
kernel provides only once written, so a slow sender announcing a huge frame costs what
it sent, not what it announced (the broker's `FrameBuffers` reuse those too, within its
memory pool).
"""

from __future__ import annotations

import mmap
import struct

from broker.protocol.frame_buffers import (
    LARGE_FRAME,
    POOLED_FRAME,
    FrameBuffers,
    anonymous_mapping,
)

_SIZE = struct.Struct(">i")

READ_AHEAD = 16384
"""Bytes read at a time while no frame is in progress: a few small requests, or the
size prefix and the start of a large one."""
MAX_RECEIVE = 1 << 18
"""The largest single read into a frame's buffer."""
MAPPED_FRAME = LARGE_FRAME
"""Frames at least this large (16 MiB), not yet whole, get a mapping of their own size
(lazily paged when fresh; reused, given `FrameBuffers.keep_large`)."""

Frame = bytes | memoryview


class InvalidFrameSize(Exception):
    """A negative size, or one above `socket.request.max.bytes`: Kafka closes the connection."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"invalid frame size {size} (socket.request.max.bytes={max_size})")
        self.size = size


class FrameDecoder:
    """Splits received bytes into frames; see the module docstring for the read protocol."""

    __slots__ = ("_buffer", "_buffers", "_filled", "_frame", "_max_size", "_size", "_start")

    def __init__(self, max_size: int, buffers: FrameBuffers | None = None) -> None:
        self._buffers = buffers
        self._buffer = bytearray()
        self._start = 0
        self._max_size = max_size
        self._frame: bytearray | mmap.mmap | None = None
        self._filled = 0
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
        return len(self._buffer) - self._start + self._filled

    @property
    def held_bytes(self) -> int:
        """Bytes received into the decoder's buffers, taken or not (what it costs in
        memory: a large frame's mapping is paged in only as it is written)."""
        return len(self._buffer) + self._filled

    @property
    def in_frame(self) -> bool:
        """Whether part of a frame (its prefix included) has been received."""
        return self._frame is not None or len(self._buffer) > self._start

    def drop_frame(self) -> None:
        """Give up the frame in progress and its buffer (its connection is closing), so
        that its buffer can serve another frame at once."""
        self._frame = None
        self._filled = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        frame = self._frame
        if frame is not None:
            filled = self._filled
            if filled + len(data) > self._size:
                raise ValueError("fed more bytes than read_size() asked for")
            frame[filled : filled + len(data)] = data
            self._filled = filled + len(data)
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
        if self._frame is not None:
            return min(self._size - self._filled, MAX_RECEIVE)
        return READ_AHEAD

    def frame_space(self, limit: int = MAX_RECEIVE) -> memoryview | None:
        """Where the next bytes of a frame in progress go (at most `limit` of them), for a
        caller that reads into it and then calls `advance()`; None between frames."""
        frame = self._frame
        if frame is None:
            return None
        filled = self._filled
        return memoryview(frame)[filled : filled + min(self._size - filled, limit)]

    def advance(self, count: int) -> None:
        """`count` bytes were written into `frame_space()`."""
        if self._frame is None or self._filled + count > self._size:
            raise ValueError("advanced past the frame in progress")
        self._filled += count

    def missing(self) -> int:
        """How many more bytes the next frame needs (at least 1 when incomplete)."""
        size = self.next_size()
        if size is None:
            return 4 - self.buffered
        if self._frame is not None:
            return size - self._filled
        return max(0, 4 + size - (len(self._buffer) - self._start))

    def next_frame(self) -> Frame | None:
        """Remove and return the next complete frame's payload, or None.

        Call it only once the frame's size (`next_size()`) has been admitted: a frame
        not yet wholly buffered gets its own buffer here."""
        frame = self._frame
        if frame is not None:
            if self._filled < self._size:
                return None
            self._frame = None
            self._filled = 0
            view = memoryview(frame)
            return (view if len(frame) == self._size else view[: self._size]).toreadonly()
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
        # Incomplete: what has arrived moves to the frame's own buffer, of the frame's
        # size, which later reads fill in place. The read buffer then holds nothing,
        # since reads stop at a frame's end.
        frame = self._frame_buffer(size)
        frame[:available] = self._buffer[start:]
        self._frame, self._size, self._filled = frame, size, available
        self._buffer = bytearray()
        self._start = 0
        return None

    def _frame_buffer(self, size: int) -> bytearray | mmap.mmap:
        if size >= POOLED_FRAME and self._buffers is not None:
            return self._buffers.take(size)
        return anonymous_mapping(size) if size >= MAPPED_FRAME else bytearray(size)
