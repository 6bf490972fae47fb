"""Size-prefixed framing of the Kafka protocol, sans-IO.

Every request is a 4-byte big-endian signed length followed by that many
bytes. The decoder is fed whatever the socket returned and hands out one
complete frame at a time; it never reads ahead of what it is given, so the
caller controls back-pressure (one request in flight per connection).
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class InvalidFrameSize(Exception):
    """A negative size, or one above `socket.request.max.bytes`: Kafka closes the connection."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"invalid frame size {size} (socket.request.max.bytes={max_size})")
        self.size = size


class FrameDecoder:
    """Accumulates received bytes and splits off complete frames."""

    __slots__ = ("_buffer", "_max_size", "_start")

    def __init__(self, max_size: int) -> None:
        self._buffer = bytearray()
        self._start = 0
        self._max_size = max_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._start and self._start == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        self._buffer += data

    @property
    def max_size(self) -> int:
        return self._max_size

    @max_size.setter
    def max_size(self, value: int) -> None:
        """SASL caps frames lower until a connection has authenticated."""
        self._max_size = value

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._start

    def next_size(self) -> int | None:
        """The size of the next frame once its prefix has arrived; validates it."""
        if len(self._buffer) - self._start < 4:
            return None
        size: int = _SIZE.unpack_from(self._buffer, self._start)[0]
        if size < 0 or size > self._max_size:
            raise InvalidFrameSize(size, self._max_size)
        return size

    def missing(self) -> int:
        """How many more bytes the next frame needs (at least 1 when incomplete)."""
        size = self.next_size()
        if size is None:
            return 4 - self.buffered
        return max(0, 4 + size - self.buffered)

    def next_frame(self) -> bytes | None:
        """Remove and return the next complete frame's payload, or None."""
        size = self.next_size()
        if size is None or self.buffered < 4 + size:
            return None
        start = self._start + 4
        frame = bytes(self._buffer[start : start + size])
        self._start = start + size
        if self._start > 65536 and self._start * 2 > len(self._buffer):
            del self._buffer[: self._start]
            self._start = 0
        return frame
