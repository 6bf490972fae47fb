"""Trio's mock clock for tests that run a whole broker.

A broker starts with work in threads (disk I/O): on an autojumping clock, every moment
a thread runs with all tasks asleep lets the clock jump to the next timer, so a
connection's `connections.max.idle.ms` can pass while its request is written to disk.
Such tests take pytest-trio's `mock_clock`, let it run at real speed while the broker
and their clients are set up (`at_real_speed`), and make it autojump only for the part
that waits on the broker's deadlines (idle, re-authentication, read timeout), where nothing runs in a
thread.
"""

from __future__ import annotations

import math

from trio.testing import MockClock


def at_real_speed(clock: MockClock) -> None:
    """Time passes as on the wall clock, without jumps."""
    clock.rate = 1.0
    clock.autojump_threshold = math.inf


def autojump(clock: MockClock) -> None:
    """From now on, time jumps to the next deadline whenever every task waits."""
    clock.rate = 0.0
    clock.autojump_threshold = 0.0
