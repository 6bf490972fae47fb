"""Buffers for large frames that are reused while a flood lasts and given back to the
kernel after it, so that a broker's resident memory follows its memory pool.

A large frame (`POOLED_FRAME` up to `framing.MAPPED_FRAME`) used to get a bytearray of
its size from the allocator. glibc serves such sizes from its heap once it has freed one
(its mmap threshold rises to the largest chunk freed), and a heap keeps what it frees
wherever a smaller live allocation sits above it: under a flood of 900 KiB frames with
a 50 MB pool the broker's RSS grew by up to 1.26 times the pool, with the pool never
over. A fresh anonymous mapping per frame gives memory back at once, but the kernel then
faults in and zeroes every page of every frame (about 0.9 ms per 900 KiB frame here,
against 0.03-0.05 ms for a reused bytearray), and the broker takes fewer frames a
second. So frames get mappings, rounded up to `GRANULE`, reused: a mapping whose frame
is no longer referenced anywhere is kept for the next frame of its size, up to
`keep_bytes` of idle mappings in all and no more than `room()` says (the broker's: what
its memory pool has free); beyond that it is unmapped. An idle mapping then stands for
pool memory nobody uses, and what the broker holds for frames stays within the pool
(the live frames, which the pool counts, plus idle mappings at most its free bytes; plus
at most a granule's rounding per frame, never paged in).

A frame is handed out as a memoryview of its mapping; whoever decodes it may keep
slices of it (records). A mapping is free once nothing references it but this pool:
every memoryview over it, sliced or not, holds its exporter through a managed buffer,
so the mapping's reference count says (CPython's, which the broker runs on).
"""

from __future__ import annotations

import mmap
import sys
from collections import deque
from collections.abc import Callable

POOLED_FRAME = 1 << 17
"""Frames at least this large (128 KiB, glibc's initial mmap threshold) get a reused
mapping."""
GRANULE = 1 << 16
"""Mappings are sized in steps of 64 KiB, so frames of about one size share them."""
DEFAULT_KEEP_BYTES = 1 << 24
"""Idle mappings kept without a pool to size them by (16 MiB)."""

_UNREFERENCED = 2
"""A mapping's reference count, taken off the lent list, when nothing else holds it: the
sweep's variable and `getrefcount`'s argument."""


def capacity_for(size: int) -> int:
    return -(-size // GRANULE) * GRANULE


class FrameBuffers:
    """Mappings lent to frames in progress or handed out, and idle ones kept for reuse."""

    __slots__ = ("_idle", "_idle_bytes", "_lent", "_room", "keep_bytes", "mapped")

    def __init__(
        self, keep_bytes: int = DEFAULT_KEEP_BYTES, room: Callable[[], int] | None = None
    ) -> None:
        self.keep_bytes = keep_bytes
        self._room = room
        self._idle: dict[int, list[mmap.mmap]] = {}
        self._idle_bytes = 0
        self._lent: deque[mmap.mmap] = deque()
        self.mapped = 0
        """Mappings made so far (a reused one is not counted again)."""

    @property
    def idle_bytes(self) -> int:
        return self._idle_bytes

    @property
    def held_bytes(self) -> int:
        """Bytes of every mapping held: lent (in use or not yet seen free) and idle."""
        return self._idle_bytes + sum(len(buffer) for buffer in self._lent)

    def take(self, size: int) -> mmap.mmap:
        """A mapping of at least `size` bytes for a frame, reused when one is idle. Its
        contents are left over from an earlier frame: the caller fills it."""
        self.sweep()
        capacity = capacity_for(size)
        idle = self._idle.get(capacity)
        if idle:
            buffer = idle.pop()
            self._idle_bytes -= capacity
        else:
            buffer = mmap.mmap(-1, capacity)
            self.mapped += 1
            self._trim(self._limit())
        self._lent.append(buffer)
        return buffer

    def _limit(self) -> int:
        """The idle bytes that may be kept now."""
        room = self._room
        return self.keep_bytes if room is None else min(self.keep_bytes, room())

    def _trim(self, limit: int) -> None:
        """Unmap idle mappings, largest first, until they total at most `limit`."""
        if self._idle_bytes <= limit:
            return
        for capacity in sorted(self._idle, reverse=True):
            idle = self._idle[capacity]
            while idle and self._idle_bytes > limit:
                idle.pop().close()
                self._idle_bytes -= capacity
            if not idle:
                del self._idle[capacity]

    def sweep(self) -> None:
        """Take back the lent mappings nothing references any more: kept while idle
        ones total at most `keep_bytes`, unmapped beyond."""
        lent = self._lent
        limit = self._limit()
        self._trim(limit)
        for _ in range(len(lent)):
            buffer = lent.popleft()
            if sys.getrefcount(buffer) > _UNREFERENCED:
                lent.append(buffer)
                continue
            capacity = len(buffer)
            if self._idle_bytes + capacity <= limit:
                self._idle.setdefault(capacity, []).append(buffer)
                self._idle_bytes += capacity
            else:
                buffer.close()


__all__ = ["GRANULE", "POOLED_FRAME", "FrameBuffers", "capacity_for"]
