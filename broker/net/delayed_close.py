"""Connections closed later, all by one timer task (KIP-306's delayed close).

Kafka answers a failed authentication only after `connection.failed.authentication.
delay.ms` and then closes, so a client in a tight reconnect loop (a wrong password
in a config, or someone guessing) is slowed down. Holding the connection's own task
through that delay would keep a task, its stack and its processor's bookkeeping per
failure; here the connection's task ends at once and hands a `finish` callback (send
the prepared answer, close the socket) to this queue, where one task sleeps until the
earliest deadline and runs every callback that is due. The task exists only while
the queue holds something, so an idle broker has none.

Deadlines are Trio time (`trio.current_time()`), so tests run it on the mock clock.
The task wakes on ticks of `TICK_S`, finishing everything due by then at once: under a
flood of failures one wake serves many, and a close comes at most a tick late.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Awaitable, Callable

import trio

log = logging.getLogger(__name__)

Finish = Callable[[], None]
Spawn = Callable[[Callable[[], Awaitable[None]]], object]
TICK_S = 0.01


def _spawn_system_task(run: Callable[[], Awaitable[None]]) -> object:
    """A system task outlives any one processor's nursery and is cancelled only when
    the whole run ends, which is when what is still queued is finished at once."""
    return trio.lowlevel.spawn_system_task(run, name="delayed-close")


class DelayedCloseQueue:
    """Callbacks run at their deadlines (at most a tick after), in deadline order, by
    one task."""

    def __init__(self, spawn: Spawn = _spawn_system_task, tick_s: float = TICK_S) -> None:
        self._spawn = spawn
        self._tick_s = tick_s
        self._heap: list[tuple[float, int, Finish]] = []
        self._order = itertools.count()  # equal deadlines finish in arrival order
        self._running = False
        self._earlier = trio.Event()  # set when a new entry is due before the one awaited

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, deadline: float, finish: Finish) -> None:
        """Run `finish` once `trio.current_time()` reaches `deadline`; never raises."""
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (deadline, next(self._order), finish))
        if not self._running:
            self._running = True
            self._spawn(self._run)
        elif earliest is not None and deadline < earliest:
            self._earlier.set()

    async def _run(self) -> None:
        try:
            while self._heap:
                self._earlier = trio.Event()
                with trio.move_on_at(self._wake_at(self._heap[0][0])):
                    await self._earlier.wait()
                self._finish_due(trio.current_time())
        finally:
            # Cancelled only when the run ends: nothing may stay open behind it.
            self._finish_due(float("inf"))
            self._running = False

    def _wake_at(self, deadline: float) -> float:
        """The first tick at or after `deadline`."""
        if self._tick_s <= 0:
            return deadline
        # max(): the product can round to just below `deadline`, which would spin.
        return max(deadline, math.ceil(deadline / self._tick_s) * self._tick_s)

    def _finish_due(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            _, _, finish = heapq.heappop(self._heap)
            try:
                finish()
            except Exception:  # a system task must never raise: it would end the run
                log.exception("delayed close failed")
