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

Frames of `LARGE_FRAME` (16 MiB) and more get a mapping of their own size, whose pages
the kernel provides only as they are written, so a slow sender announcing a huge frame
costs what it sent. Given `keep_large` (the broker's), their mappings are reused too: a
flood of pool-sized frames otherwise paid, per 50 MB frame, about 30 ms of CPU in page
faults and 9 ms unmapping it (issue 22, point 1), competing with every other client for
the cores. At most `keep_large` of them are kept idle, within `room()` like the others
(not `keep_bytes`: one is larger than the pool's reserve), and only while
`large_waiting()` says a large frame waits for the pool's memory (a flood, whose next
frame takes one at once; after it, or between one client's frames, they are given up).
A frame takes the idle one that fits it best: one at most a sixteenth larger, or else
the largest smaller one, grown (`mremap`: the new pages again provided as written).
Those given up go to `discard` (the broker's unmaps them in a worker thread: 9 ms for a
written 50 MB mapping).
"""

from __future__ import annotations

import mmap
import sys
from collections import deque
from collections.abc import Callable

POOLED_FRAME = 1 << 17
"""Frames at least this large (128 KiB, glibc's initial mmap threshold) get a reused
mapping."""
LARGE_FRAME = 1 << 24
"""Frames at least this large (16 MiB) get a mapping of their own size, reused only given
`keep_large`."""
GRANULE = 1 << 16
"""Mappings are sized in steps of 64 KiB, so frames of about one size share them."""
LARGE_SLACK = 16
"""A large frame takes an idle mapping at most 1/LARGE_SLACK larger than itself."""
DEFAULT_KEEP_BYTES = 1 << 24
"""Idle mappings kept without a pool to size them by (16 MiB)."""

_UNREFERENCED = 2
"""A mapping's reference count, taken off the lent list, when nothing else holds it: the
sweep's variable and `getrefcount`'s argument."""


def capacity_for(size: int) -> int:
    """The mapping a frame of `size` bytes below `LARGE_FRAME` gets."""
    return -(-size // GRANULE) * GRANULE


def anonymous_mapping(size: int) -> mmap.mmap:
    """Private anonymous memory, as malloc maps it: Python's default for `mmap(-1, ...)`
    is a shared mapping (backed by shmem), whose pages cost about 1.5 times as much to
    fault in and which cannot grow (`mremap` past its shmem object's size: SIGBUS)."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)


def _close(buffer: mmap.mmap) -> None:
    buffer.close()


class FrameBuffers:
    """Mappings lent to frames in progress or handed out, and idle ones kept for reuse."""

    __slots__ = (
        "_discard",
        "_idle",
        "_idle_bytes",
        "_idle_large",
        "_idle_large_bytes",
        "_large_waiting",
        "_lent",
        "_room",
        "keep_bytes",
        "keep_large",
        "mapped",
    )

    def __init__(
        self,
        keep_bytes: int = DEFAULT_KEEP_BYTES,
        room: Callable[[], int] | None = None,
        keep_large: int = 0,
        discard: Callable[[mmap.mmap], None] = _close,
        large_waiting: Callable[[], bool] = lambda: True,
    ) -> None:
        """`room`: the bytes the memory pool has free (below 0 while it is overshot);
        `large_waiting`: whether a large frame waits for them."""
        self.keep_bytes = keep_bytes
        self.keep_large = keep_large
        self._room = room
        self._discard = discard
        self._large_waiting = large_waiting
        self._idle: dict[int, list[mmap.mmap]] = {}
        self._idle_large: list[mmap.mmap] = []
        self._idle_bytes = 0
        self._idle_large_bytes = 0
        self._lent: deque[mmap.mmap] = deque()
        self.mapped = 0
        """Mappings made so far (a reused one is not counted again)."""

    @property
    def idle_bytes(self) -> int:
        """Idle mappings' bytes, of both kinds."""
        return self._idle_bytes + self._idle_large_bytes

    @property
    def idle_large(self) -> int:
        """Idle mappings of `LARGE_FRAME` and more."""
        return len(self._idle_large)

    @property
    def idle_large_bytes(self) -> int:
        return self._idle_large_bytes

    @property
    def held_bytes(self) -> int:
        """Bytes of every mapping held: lent (in use or not yet seen free) and idle."""
        return self.idle_bytes + sum(len(buffer) for buffer in self._lent)

    def take(self, size: int) -> mmap.mmap:
        """A mapping of at least `size` bytes for a frame, reused when one is idle. Its
        contents are left over from an earlier frame: the caller fills it."""
        if size >= LARGE_FRAME and not self.keep_large:
            return anonymous_mapping(size)  # not lent: unmapped with its last reference
        # The frame's bytes were admitted just now: a mapping given back before that
        # serves it, whatever room is left.
        self._adopt_unreferenced()
        buffer = self._reuse_large(size) if size >= LARGE_FRAME else self._reuse(size)
        if buffer is None:
            buffer = anonymous_mapping(size if size >= LARGE_FRAME else capacity_for(size))
            self.mapped += 1
        self._lent.append(buffer)
        self._trim(0)
        return buffer

    def _reuse(self, size: int) -> mmap.mmap | None:
        capacity = capacity_for(size)
        idle = self._idle.get(capacity)
        if not idle:
            return None
        self._idle_bytes -= capacity
        return idle.pop()

    def _reuse_large(self, size: int) -> mmap.mmap | None:
        """The idle large mapping that fits `size` best (see the module docstring)."""
        idle = self._idle_large
        fits = [b for b in idle if size <= len(b) <= size + size // LARGE_SLACK]
        smaller = [b for b in idle if len(b) < size]
        if fits:
            buffer = min(fits, key=len)
        elif smaller:
            buffer = max(smaller, key=len)
        else:
            return None
        del fits, smaller
        idle.remove(buffer)
        self._idle_large_bytes -= len(buffer)
        if len(buffer) < size:
            try:
                buffer.resize(size)
            except OSError:  # no room to grow it: a fresh one
                self._discard(buffer)
                return None
        return buffer

    def _limit(self, freeing: int) -> int:
        """The idle bytes that may be kept now, `freeing` bytes about to be given back
        to the pool."""
        room = self._room
        return -1 if room is None else max(room() + freeing, 0)

    def _trim(self, freeing: int) -> None:
        """Unmap idle mappings, largest first, until the small ones total at most
        `keep_bytes`, at most `keep_large` large ones are left (none unless a large frame
        waits), and all of them fit the room left."""
        self._trim_small(self.keep_bytes)
        large = self._idle_large
        keep_large = self.keep_large if large and self._large_waiting() else 0
        if len(large) > keep_large:
            large.sort(key=len)
            while len(large) > keep_large:
                self._drop_large(large.pop())
        limit = self._limit(freeing)
        if limit < 0 or self.idle_bytes <= limit:
            return
        large.sort(key=len)
        while large and self.idle_bytes > limit:
            self._drop_large(large.pop())
        self._trim_small(limit)

    def _drop_large(self, buffer: mmap.mmap) -> None:
        self._idle_large_bytes -= len(buffer)
        self._discard(buffer)

    def _trim_small(self, limit: int) -> None:
        """Unmap small idle mappings, largest first, until they total at most `limit`."""
        if self._idle_bytes <= limit:
            return
        for capacity in sorted(self._idle, reverse=True):
            idle = self._idle[capacity]
            while idle and self._idle_bytes > limit:
                idle.pop().close()
                self._idle_bytes -= capacity
            if not idle:
                del self._idle[capacity]

    def _adopt_unreferenced(self) -> None:
        """Move the lent mappings nothing references any more to the idle ones."""
        lent = self._lent
        for _ in range(len(lent)):
            buffer = lent.popleft()
            if sys.getrefcount(buffer) > _UNREFERENCED:
                lent.append(buffer)
            elif len(buffer) >= LARGE_FRAME:
                self._idle_large.append(buffer)
                self._idle_large_bytes += len(buffer)
            else:
                self._idle.setdefault(len(buffer), []).append(buffer)
                self._idle_bytes += len(buffer)

    @staticmethod
    def released(buffer: mmap.mmap) -> bool:
        """Whether nothing references lent `buffer` but this pool and the caller, which
        holds it in one variable."""
        return sys.getrefcount(buffer) <= _UNREFERENCED + 2  # the caller's, the argument

    def sweep(self, freeing: int = 0) -> None:
        """Take back the lent mappings nothing references any more, and keep what the
        limits allow, `freeing` bytes about to be given back to the pool (a large frame
        answered: its mapping is kept for the next one, which the pool admits as soon as
        it has the bytes)."""
        self._adopt_unreferenced()
        self._trim(freeing)


__all__ = [
    "GRANULE",
    "LARGE_FRAME",
    "POOLED_FRAME",
    "FrameBuffers",
    "anonymous_mapping",
    "capacity_for",
]
