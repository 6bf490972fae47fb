"""The request-buffer memory pool behind `queued.max.request.bytes` (spec §4.6).

Kafka bounds the memory held by received-but-unhandled requests with a
non-strict counting pool (SimpleMemoryPool with strict=false): an allocation
succeeds whenever any memory is left, so one large request can never starve
forever behind many small ones, at the price of overshooting by at most one
maximum-size request.

Kafka's pool is also a free-for-all: every muted connection retries on each
poll, so under a flood of large frames whoever polls first wins, a small
request from a well-behaved client can wait for many seconds, and the
overshoot allowed by non-strictness adds up. Here waiters are served in
arrival order, in two lanes, and grants are strict but for one case: large
requests share the pool but its last tenth (the reserve); small ones (at most a
sixteenth of the reserve) always have the reserve, and may use whatever else is
left while no large request waits. A flood of large frames then never holds a
small request up for longer than the small ones ahead of it, small ones cannot
starve a large one (they do not count in its lane), and use stays within the
pool. The one exception keeps every frame admissible: a request larger than the
large lane is granted when no other large request holds memory and small ones hold
no more than the reserve; it borrows from the reserve without taking it from small
requests, which may then overshoot the pool by what it borrowed (at most the
reserve, so use stays within 1.1 times the pool). Before this, such a frame (one as
large as the pool) took the reserve, and a small request that arrived before the
next one waited behind it (issue 22, item 1).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import trio

from broker.metrics import SampledRate
from broker.net.response_memory import ResponseMemory
from broker.net.unmapping import unmap_in_worker_thread
from broker.protocol.frame_buffers import DEFAULT_KEEP_BYTES, FrameBuffers

UNBOUNDED_AVAILABLE = 2**63 - 1
"""What Kafka reports as MemoryPoolAvailable without a pool (Long.MAX_VALUE)."""

RESERVE_SHARE = 10
"""The reserve is 1/RESERVE_SHARE of the pool; large requests leave it alone."""
SMALL_SHARE = 16
"""A request of at most 1/SMALL_SHARE of the reserve is small."""
MAX_SMALL_ALLOCATION = 1 << 20
KEPT_LARGE_FRAMES = 2
"""Idle mappings of frames of 16 MiB and more kept for the next ones, while large frames
wait for memory (within the pool's free bytes): under a flood of pool-sized frames one is
answered as the next waits for its bytes."""


class _Waiter:
    __slots__ = ("arrival", "event", "granted", "size")

    def __init__(self, size: int, arrival: int) -> None:
        self.size = size
        self.arrival = arrival
        self.granted = False
        self.event = trio.Event()


class MemoryPool:
    """A byte-counting pool; `total_bytes` <= 0 (Kafka's -1) means unbounded."""

    def __init__(
        self,
        total_bytes: int,
        max_single_allocation: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        depleted_window_s: float = 30.0,
        depleted_samples: int = 2,
    ) -> None:
        if max_single_allocation < 1:
            raise ValueError(f"max_single_allocation must be >= 1, got {max_single_allocation}")
        self._size: int | None = total_bytes if total_bytes > 0 else None
        self.max_single_allocation = max_single_allocation
        self._available = total_bytes if total_bytes > 0 else 0
        size = max(total_bytes, 0)
        self.reserve = size // RESERVE_SHARE
        self.small_allocation = min(self.reserve // SMALL_SHARE, MAX_SMALL_ALLOCATION)
        self._large_used = 0
        self._arrivals = 0
        self._large_waiters: deque[_Waiter] = deque()
        self._small_waiters: deque[_Waiter] = deque()
        self._clock = clock
        self._depleted_since: float | None = None
        self._depleted_total = 0.0
        self._depleted_rate = SampledRate(depleted_window_s, depleted_samples, clock)
        self._available_event = trio.Event()
        if self._size is not None:
            self._available_event.set()
        # Responses waiting to be written get a budget of their own, the pool's size.
        self.responses = ResponseMemory(self._size)
        # Large frames' buffers, reused; idle ones are kept up to the reserve (and
        # KEPT_LARGE_FRAMES of 16 MiB and more while large frames wait) and only while
        # the pool has as much free, so that the memory held for frames stays within
        # the pool (frame_buffers.py).
        self.frame_buffers = FrameBuffers(
            self.reserve or DEFAULT_KEEP_BYTES,
            None if self._size is None else lambda: self._available,
            KEPT_LARGE_FRAMES,
            unmap_in_worker_thread,
            lambda: bool(self._large_waiters),
        )

    # ---- state

    @property
    def is_unbounded(self) -> bool:
        return self._size is None

    @property
    def size(self) -> int | None:
        return self._size

    @property
    def available(self) -> int:
        """Bytes left (none while small requests overshoot the pool, see above)."""
        return UNBOUNDED_AVAILABLE if self._size is None else max(self._available, 0)

    @property
    def used(self) -> int:
        return 0 if self._size is None else self._size - self._available

    @property
    def waiting(self) -> int:
        """Allocations queued for memory (connections muted by the pool)."""
        return len(self._large_waiters) + len(self._small_waiters)

    @property
    def is_out_of_memory(self) -> bool:
        return self._size is not None and self._available <= 0

    @property
    def is_low(self) -> bool:
        """Below 10% of the pool: the selector starts shuffling ready connections
        so the same ones do not win every scarce byte."""
        return self._size is not None and self._available < self._size * 0.1

    @property
    def depleted_time_s(self) -> float:
        """Total time allocations were being refused (MemoryPoolDepletedTimeTotal),
        including a dry spell that is still going on."""
        ongoing = 0.0 if self._depleted_since is None else self._clock() - self._depleted_since
        return self._depleted_total + ongoing

    def depleted_fraction(self) -> float:
        """Share of recent time spent refusing allocations (MemoryPoolAvgDepletedPercent)."""
        now = self._clock()
        size = self._depleted_rate.window_size(now)
        ongoing = 0.0 if self._depleted_since is None else min(now - self._depleted_since, size)
        return min(1.0, (self._depleted_rate.total(now) + ongoing) / size) if size > 0 else 0.0

    # ---- operations

    def is_small(self, n: int) -> bool:
        return n <= self.small_allocation

    def _fits(self, n: int) -> bool:
        assert self._size is not None
        lane = self._size - self.reserve
        small_used = self._size - self._available - self._large_used
        if self.is_small(n):
            # The reserve is always theirs; the large lane's free bytes only while no
            # large request waits, so that they cannot hold it up for ever.
            if small_used + n <= self.reserve:
                return True
            return not self._large_waiters and n <= self._available
        # Small requests beyond the reserve hold bytes of the large lane.
        lane_used = self._large_used + max(small_used - self.reserve, 0)
        if lane_used + n <= lane:
            return True
        # Larger than the lane: once no other large request holds memory, borrowing
        # from the reserve, which small requests keep (see the module's docstring).
        return n > lane and lane_used == 0

    def _check(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"cannot allocate a negative size ({n})")
        if n > self.max_single_allocation:
            raise ValueError(
                f"requested {n} bytes, above the largest single allocation "
                f"{self.max_single_allocation}"
            )

    def try_allocate(self, n: int) -> bool:
        """Allocate at once if `n` fits and no one of its lane is waiting ahead of it."""
        if self._size is None or n == 0:
            if n < 0:
                raise ValueError(f"cannot allocate a negative size ({n})")
            return True
        self._check(n)
        queue = self._small_waiters if self.is_small(n) else self._large_waiters
        if queue or not self._fits(n):
            if self._depleted_since is None:
                self._depleted_since = self._clock()
            return False
        self._take(n)
        return True

    async def allocate(self, n: int) -> None:
        """Allocate `n` bytes, waiting in line (per lane) until they fit.

        Cancelled while waiting, it leaves the line and holds nothing."""
        if self.try_allocate(n):
            return
        self._arrivals += 1
        waiter = _Waiter(n, self._arrivals)
        queue = self._small_waiters if self.is_small(n) else self._large_waiters
        queue.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self.release(n)
            else:
                queue.remove(waiter)
                self._serve_waiters()
            raise

    def release(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"cannot release a negative size ({n})")
        if self._size is None or n == 0:
            return
        self._available += n
        if not self.is_small(n):
            self._large_used -= n
        if self._available > self._size or self._large_used < 0:
            raise AssertionError(
                f"released more than was allocated: available {self._available} > size {self._size}"
            )
        if self._available > 0:
            self._available_event.set()
        self._serve_waiters()

    async def wait_until_available(self) -> None:
        """Return once some memory is free (at once if it already is)."""
        while self.is_out_of_memory:
            await self._available_event.wait()

    def _take(self, n: int) -> None:
        self._available -= n
        if not self.is_small(n):
            self._large_used += n
        self._end_dry_spell()
        if self._available <= 0:
            self._available_event = trio.Event()

    def _serve_waiters(self) -> None:
        """Grant what fits, in arrival order across both lanes (in order within each):
        of the two lanes' first waiters, the one that came first goes first when it
        fits, and a lane whose first waiter does not fit waits as a whole."""
        while True:
            heads = [q for q in (self._large_waiters, self._small_waiters) if q]
            heads.sort(key=lambda q: q[0].arrival)
            for queue in heads:
                if self._fits(queue[0].size):
                    waiter = queue.popleft()
                    self._take(waiter.size)
                    waiter.granted = True
                    waiter.event.set()
                    break
            else:
                return

    def _end_dry_spell(self) -> None:
        # Like SimpleMemoryPool, a dry spell ends with the next successful allocation.
        if self._depleted_since is not None:
            now = self._clock()
            spell = now - self._depleted_since
            self._depleted_since = None
            self._depleted_total += spell
            self._depleted_rate.record(spell, now)

    def __repr__(self) -> str:
        if self._size is None:
            return "MemoryPool(unbounded)"
        return f"MemoryPool(available={self._available}/{self._size})"


DEFAULT_POOL_BYTES = 104857600
"""The pool when `queued.max.request.bytes` is <= 0, unless a frame may be larger."""


def pool_size(queued_max_request_bytes: int, socket_request_max_bytes: int) -> int:
    """The pool's size: Kafka's -1 (no pool) would let memory grow without bound under
    a flood of large frames, so the default is bounded too, and always admits the
    largest frame."""
    if queued_max_request_bytes > 0:
        return queued_max_request_bytes
    return max(socket_request_max_bytes, DEFAULT_POOL_BYTES)


__all__ = ["DEFAULT_POOL_BYTES", "UNBOUNDED_AVAILABLE", "MemoryPool", "pool_size"]
