"""Each process's load, reported to the shared metadata store for leader placement.

The load is the bytes produced to the process per second over the last
`cluster.load.window.ms` (Kafka's BytesInPerSec, all topics), measured from the meter's
count at each report rather than from its one-minute exponential rate, so the window is
what the setting says. Reports go to the store every `cluster.load.report.interval.ms`
without bumping the metadata version: they change no process's view, only where the next
partition is placed (broker/cluster/placement_by_load.py).
"""

from __future__ import annotations

import logging
import sqlite3
from collections import deque
from typing import Protocol

import trio

from broker.metrics import Meter

log = logging.getLogger(__name__)


class LoadSink(Protocol):
    def report_load(self, node_id: int, bytes_in_per_s: float) -> None: ...


class BytesInWindow:
    """Bytes per second between the oldest sample still inside the window and the newest
    (sans-IO: the caller gives the time and the meter's running count)."""

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._samples: deque[tuple[float, float]] = deque()

    def record(self, now: float, total_bytes: float) -> float:
        """Add a sample; returns the rate over the window ending now (0 until two samples)."""
        self._samples.append((now, total_bytes))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window_s:
            self._samples.popleft()
        first_time, first_bytes = self._samples[0]
        elapsed = now - first_time
        return max(total_bytes - first_bytes, 0.0) / elapsed if elapsed > 0 else 0.0


class LoadReporter:
    """A service: writes this process's bytes-in rate to the store at every interval."""

    def __init__(
        self,
        store: LoadSink,
        node_id: int,
        bytes_in: Meter,
        *,
        interval_s: float,
        window_s: float,
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._bytes_in = bytes_in
        self._interval_s = interval_s
        self._window = BytesInWindow(window_s)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            rate = self._window.record(trio.current_time(), self._bytes_in.count)
            try:
                await trio.to_thread.run_sync(self._store.report_load, self._node_id, rate)
            except sqlite3.Error:
                # A busy store: placement uses the last report until the next one lands.
                log.exception("cannot report this process's load to the metadata store")
            await trio.sleep(self._interval_s)
