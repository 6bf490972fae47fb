"""How many tasks are queued for Trio's next scheduler round, in constant time.

`trio.lowlevel.current_statistics().tasks_runnable` is the public way to ask, but the
same call also counts the tasks waiting on I/O by walking every registered socket: 37 µs
with 2,000 connections open, paid by the acceptor for every connection it takes while it
lets established work go first (acceptor.defer_to_runnable_tasks). The run queue's
length is read from Trio's runner instead; should a Trio release move it, the public
call is used again (tests/net/test_run_queue.py holds the two to the same answer).
"""

from __future__ import annotations

from collections.abc import Callable

import trio


def _public() -> int:
    return trio.lowlevel.current_statistics().tasks_runnable


def _from_runner() -> Callable[[], int]:
    try:
        from trio._core._run import GLOBAL_RUN_CONTEXT
    except ImportError:
        return _public

    def runnable() -> int:
        try:
            return len(GLOBAL_RUN_CONTEXT.runner.runq)
        except AttributeError:  # outside trio.run, or a Trio without it
            return _public()

    return runnable


runnable_tasks: Callable[[], int] = _from_runner()
"""Tasks queued to run in the next round (the caller is not among them)."""


__all__ = ["runnable_tasks"]
