"""The process's own gauges under Prometheus' standard names (process_cpu_seconds_total, ...).

Registered with an empty type so the exporter's naming rule yields exactly the names every
Prometheus dashboard already knows. Linux only for RSS and open fds (read from /proc);
elsewhere those gauges read NaN rather than fail the scrape.
"""

from __future__ import annotations

import math
import os
import resource
import time

from broker.metrics import MetricsRegistry

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds() -> float:
    """User plus system CPU time of this process, threads included."""
    return time.process_time()


def resident_memory_bytes() -> float:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return float(int(statm.read().split()[1]) * _PAGE_SIZE)
    except (OSError, IndexError, ValueError):
        return math.nan


def open_fds() -> float:
    try:
        return float(len(os.listdir("/proc/self/fd")))
    except OSError:
        return math.nan


def max_fds() -> float:
    return float(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def register_process_metrics(registry: MetricsRegistry) -> None:
    registry.gauge("process", "", "cpu_seconds_total", cpu_seconds)
    registry.gauge("process", "", "resident_memory_bytes", resident_memory_bytes)
    registry.gauge("process", "", "open_fds", open_fds)
    registry.gauge("process", "", "max_fds", max_fds)
    started = time.time()
    registry.gauge("process", "", "start_time_seconds", lambda: started)
