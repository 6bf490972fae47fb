"""The request-buffer memory pool behind `queued.max.request.bytes` (spec §4.6).

Kafka bounds the memory held by received-but-unhandled requests with a
non-strict counting pool (SimpleMemoryPool with strict=false): an allocation
succeeds whenever any memory is left, so one large request can never starve
forever behind many small ones, at the price of overshooting by at most one
maximum-size request.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from broker.metrics import SampledRate

UNBOUNDED_AVAILABLE = 2**63 - 1
"""What Kafka reports as MemoryPoolAvailable without a pool (Long.MAX_VALUE)."""


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
        self._clock = clock
        self._depleted_since: float | None = None
        self._depleted_total = 0.0
        self._depleted_rate = SampledRate(depleted_window_s, depleted_samples, clock)
        self._available_event = trio.Event()
        if self._size is not None:
            self._available_event.set()

    # ---- state

    @property
    def is_unbounded(self) -> bool:
        return self._size is None

    @property
    def size(self) -> int | None:
        return self._size

    @property
    def available(self) -> int:
        """Bytes left; negative after a non-strict overshoot."""
        return UNBOUNDED_AVAILABLE if self._size is None else self._available

    @property
    def used(self) -> int:
        return 0 if self._size is None else self._size - self._available

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

    def try_allocate(self, n: int) -> bool:
        if n < 0:
            raise ValueError(f"cannot allocate a negative size ({n})")
        if self._size is None or n == 0:
            return True
        if n > self.max_single_allocation:
            raise ValueError(
                f"requested {n} bytes, above the largest single allocation "
                f"{self.max_single_allocation}"
            )
        if self._available <= 0:
            if self._depleted_since is None:
                self._depleted_since = self._clock()
            return False
        self._available -= n
        self._end_dry_spell()
        if self._available <= 0:
            self._available_event = trio.Event()
        return True

    def release(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"cannot release a negative size ({n})")
        if self._size is None or n == 0:
            return
        self._available += n
        if self._available > self._size:
            raise AssertionError(
                f"released more than was allocated: available {self._available} > size {self._size}"
            )
        if self._available > 0:
            self._available_event.set()

    async def wait_until_available(self) -> None:
        """Return once some memory is free (at once if it already is)."""
        while self.is_out_of_memory:
            await self._available_event.wait()

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


__all__ = ["UNBOUNDED_AVAILABLE", "MemoryPool"]
