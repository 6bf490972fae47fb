"""Turns for bulk work: what large frames cost the event loop is spent while it is idle.

The broker's tasks share one thread, and a scheduler round runs every runnable task
once, so a small request, whose answer takes a few rounds (read, handle, write), waits
for whatever else those rounds run. Under a flood of large frames the loop is never
idle (the flood sends as fast as the broker reads), and each round holds the flood's
reads into frames (up to 256 KiB each, 0.1-0.3 ms of CPU, mostly the kernel's copy and,
on loopback, the sender's own TCP work) and its handlers' large Produce steps. Reading
less per step only makes more steps. So a step of bulk work (a read into a large frame,
the handling of a large request) first takes a turn: turns go one at a time, in order,
and a turn starts once every other task of the run is blocked and no I/O is ready
(Trio's `wait_all_tasks_blocked`: the scheduler wakes its waiter after a poll found
nothing to run). A small request whose bytes arrive meanwhile is read, handled and
answered first, whatever the flood; it waits for at most the one bulk step in progress.

Bulk work is slowed, never starved: a turn waits for idleness at most `max_wait_s`,
so with the loop kept busy by small requests large frames still get one step that
often (and all the idle time there is).

A turn protects small requests, so it waits only while there are some: connection
tasks count those of connections that never sent a large one (`small_requests`: a
producer's own small requests need no protection from its own or other producers'
large ones), and when none came for `QUIET_S` the loop is quiet and a turn is given at
once, without the lock and without the scheduler round that waiting for idleness costs
(most of the CPU a large frame's read spent in Python: one turn per read). The first
small request after a quiet spell may wait for the bulk steps of one round; every later
one finds the turns back.
"""

from __future__ import annotations

import trio

# `trio.testing` exports this, but importing `trio.testing` imports pytest and pygments
# wherever pytest is installed (0.3 s of CPU at every broker start in tests and benches);
# the function itself lives in trio's core (tests/net/test_bulk_turns.py checks it is
# the same one).
from trio._core._generated_run import wait_all_tasks_blocked

MAX_WAIT_S = 0.005
"""The longest a turn waits for an idle loop: with small requests keeping the loop busy,
large frames still get a turn every 5 ms."""
QUIET_S = 0.1
"""Without a small request (of a connection that sent no large one) for this long, turns
are given without waiting for idleness. The hostile-load bystander asks every 5 ms;
producers' connections send a few small requests before their first large one, which
costs the next tenth of a second of bulk steps their turns."""
QUIET_TURN_S = 0.002
"""A turn's length on a quiet loop: only other bulk work waits for it, and each turn
ended while bytes are still there costs a scheduler round."""
TURN_S = 0.0003
"""How long a turn's holder may go on (reads into one frame while its bytes are there):
a turn costs two scheduler rounds, and a small request arriving meanwhile waits for at
most one turn."""


class BulkTurns:
    """Turns for the bulk steps of one request channel's processors and handlers."""

    __slots__ = (
        "_lock",
        "_small_seen",
        "_small_until",
        "forced",
        "max_wait_s",
        "quiet_s",
        "quiet_taken",
        "small_requests",
        "taken",
    )

    def __init__(self, max_wait_s: float = MAX_WAIT_S, quiet_s: float = QUIET_S) -> None:
        self.max_wait_s = max_wait_s
        self.quiet_s = quiet_s
        self._lock = trio.Lock()
        self.taken = 0
        self.forced = 0
        """Turns started after `max_wait_s` without an idle loop."""
        self.quiet_taken = 0
        """Turns given at once, on a quiet loop."""
        self.small_requests = 0
        """Small requests seen (counted by connection tasks: no clock call each)."""
        self._small_seen = 0
        self._small_until = -float("inf")

    def quiet(self) -> bool:
        """Whether no small request came for `quiet_s` (so there is none to protect).
        A count that moved since the last look starts the spell again from now."""
        now = trio.current_time()
        if self.small_requests != self._small_seen:
            self._small_seen = self.small_requests
            self._small_until = now + self.quiet_s
        return now >= self._small_until

    async def acquire(self, yielded: bool = False) -> bool:
        """Wait for the turn, held until `release(quiet)`; returns `quiet`: True when the
        turn was given on a quiet loop, without the lock, where it is still a checkpoint
        unless the caller has just `yielded` (its step has only begun): a frame whose
        bytes keep arriving is read in steps of one turn, never in one long step."""
        if self.quiet():
            if not yielded:
                await trio.lowlevel.checkpoint()
            self.taken += 1
            self.quiet_taken += 1
            return True
        await self._locked_turn()
        return False

    async def _locked_turn(self) -> None:
        try:
            self._lock.acquire_nowait()  # free: no scheduler trip before the wait for idle
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            with trio.move_on_after(self.max_wait_s) as scope:
                await wait_all_tasks_blocked()
        except BaseException:
            self._lock.release()
            raise
        self.taken += 1
        if scope.cancelled_caught:
            self.forced += 1

    def release(self, quiet: bool = False) -> None:
        """Give back a turn `acquire` gave (`quiet`: what it returned)."""
        if not quiet:
            self._lock.release()

    async def wait(self, yielded: bool = False) -> bool:
        """A turn for the step that follows this call (the caller's next synchronous
        stretch of work): given back at once. True on a quiet loop (see `acquire`)."""
        quiet = await self.acquire(yielded)
        self.release(quiet)
        return quiet

    async def __aenter__(self) -> None:
        """`async with turns`: a turn that waits for idleness, quiet loop or not."""
        await self._locked_turn()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()


__all__ = ["MAX_WAIT_S", "QUIET_S", "QUIET_TURN_S", "TURN_S", "BulkTurns"]
