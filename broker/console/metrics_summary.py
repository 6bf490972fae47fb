"""The overview's numbers, read from the same metric families /metrics serves.

Throughput is a rate between two readings of the cumulative byte counters, so the
console keeps a short history of readings, taken when a page asks (at most one a
second): nothing runs while no console page is open.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import Metric

BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
MESSAGES_RATE = "kafka_server_brokertopicmetrics_messagesin_oneminuterate"
REQUEST_RATE = "kafka_network_requestmetrics_requests_oneminuterate"
TOTAL_TIME = "kafka_network_requestmetrics_totaltimems"
LOG_SIZE = "kafka_log_log_size"
START_TIME = "process_start_time_seconds"
HISTORY_LENGTH = 300
MIN_INTERVAL_S = 1.0


def samples(families: Iterable[Metric]) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in families for s in f.samples]


def totals(found: list[tuple[str, dict[str, str], float]]) -> dict[str, float]:
    """The all-topics counters summed over the processes."""
    out = {BYTES_IN: 0.0, BYTES_OUT: 0.0, MESSAGES_IN: 0.0}
    for name, labels, value in found:
        if name in out and "topic" not in labels:
            out[name] += value
    return out


def requests_by_api(found: list[tuple[str, dict[str, str], float]]) -> list[dict[str, Any]]:
    rates: dict[str, float] = {}
    p99: dict[str, float] = {}
    for name, labels, value in found:
        api = labels.get("request")
        if api is None:
            continue
        if name == REQUEST_RATE:
            rates[api] = rates.get(api, 0.0) + value
        elif name == TOTAL_TIME and labels.get("quantile") == "0.99" and value == value:
            p99[api] = max(p99.get(api, 0.0), value)
    return [
        {"api": api, "rate": round(rates.get(api, 0.0), 3), "p99_ms": p99.get(api)}
        for api in sorted(set(rates) | set(p99))
    ]


def started_at(found: list[tuple[str, dict[str, str], float]]) -> dict[str, float]:
    return {labels.get("node", ""): value for name, labels, value in found if name == START_TIME}


def per_topic(found: list[tuple[str, dict[str, str], float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, labels, value in found:
        topic = labels.get("topic")
        if topic is None:
            continue
        if name == LOG_SIZE:
            entry = out.setdefault(topic, {"size": 0.0, "messages_per_s": 0.0})
            entry["size"] += value
        elif name == MESSAGES_RATE:
            entry = out.setdefault(topic, {"size": 0.0, "messages_per_s": 0.0})
            entry["messages_per_s"] += value
    return out


class RateHistory:
    """Readings of cumulative counters; rates per second between consecutive ones."""

    def __init__(self, clock: Any = time.time) -> None:
        self._clock = clock
        self._readings: deque[tuple[float, dict[str, float]]] = deque(maxlen=HISTORY_LENGTH)

    def add(self, values: dict[str, float]) -> None:
        now = self._clock()
        if self._readings and now - self._readings[-1][0] < MIN_INTERVAL_S:
            return
        self._readings.append((now, values))

    def rates(self) -> list[dict[str, float]]:
        out = []
        readings = list(self._readings)
        for (t0, a), (t1, b) in itertools.pairwise(readings):
            span = t1 - t0
            out.append(
                {"time": t1} | {k: max(b.get(k, 0.0) - a.get(k, 0.0), 0.0) / span for k in b}
            )
        return out


class ValueHistory:
    """A value over time per key (a group's total lag), at most one reading a second."""

    def __init__(self, clock: Any = time.time) -> None:
        self._clock = clock
        self._series: dict[str, deque[tuple[float, float]]] = {}

    def add(self, key: str, value: float) -> list[tuple[float, float]]:
        series = self._series.setdefault(key, deque(maxlen=HISTORY_LENGTH))
        now = self._clock()
        if not series or now - series[-1][0] >= MIN_INTERVAL_S:
            series.append((now, value))
        return list(series)
