"""Kafka's quota Rate (a Rate over a SampledStat), kept cheap for the request path.

It measures exactly what `broker.metrics.SampledRate` measures (a property test holds
them equal), but a quota sensor is recorded and checked on every request, so it keeps
a running total and the time the oldest window expires instead of rescanning its
windows each time: between window changes, a record and a check are a few additions.
"""

from __future__ import annotations

import math


class QuotaRate:
    """Sum over `samples` windows of `window_s` seconds divided by the span they cover,
    at least (samples - 1) windows, as Kafka's Rate.windowSize pads it."""

    __slots__ = (
        "_current",
        "_expire_s",
        "_min_span_windows",
        "_next_purge",
        "_oldest",
        "_starts",
        "_total",
        "_values",
        "samples",
        "window_s",
    )

    def __init__(self, window_s: float, samples: int) -> None:
        if window_s <= 0 or samples < 1:
            raise ValueError("window_s must be > 0 and samples >= 1")
        self.window_s = window_s
        self.samples = samples
        self._expire_s = samples * window_s
        self._min_span_windows = samples - 1
        self._starts: list[float] = []
        self._values: list[float] = []
        self._current = 0
        self._total = 0.0
        self._oldest = math.inf
        self._next_purge = math.inf

    def _starts_changed(self) -> None:
        self._oldest = min(self._starts)
        self._next_purge = self._oldest + self._expire_s

    def _purge(self, now: float) -> None:
        """Kafka's purgeObsoleteSamples: windows older than the whole span start afresh."""
        if now < self._next_purge:
            return
        starts, values = self._starts, self._values
        for i, start in enumerate(starts):
            if now - start >= self._expire_s:
                starts[i] = now
                values[i] = 0.0
        self._total = math.fsum(values)
        self._starts_changed()

    def record(self, value: float, now: float) -> None:
        starts = self._starts
        if not starts:
            starts.append(now)
            self._values.append(0.0)
            self._current = 0
            self._starts_changed()
        elif now - starts[self._current] >= self.window_s:
            current = (self._current + 1) % self.samples
            self._current = current
            if current >= len(starts):
                starts.append(now)
                self._values.append(0.0)
            else:
                self._total -= self._values[current]
                starts[current] = now
                self._values[current] = 0.0
            self._starts_changed()
        self._values[self._current] += value
        self._total += value

    def unrecord(self, value: float, now: float) -> None:
        self.record(-value, now)

    def window_size(self, now: float) -> float:
        self._purge(now)
        oldest = self._oldest if self._starts else now
        elapsed = now - oldest
        full_windows = int(elapsed // self.window_s)
        if full_windows < self._min_span_windows:
            elapsed += (self._min_span_windows - full_windows) * self.window_s
        return elapsed

    def total(self, now: float) -> float:
        self._purge(now)
        return self._total

    def measure(self, now: float) -> float:
        size = self.window_size(now)
        return self._total / size if size > 0 else 0.0

    def throttle_time(self, bound: float, now: float) -> float:
        """Seconds until the rate is back at `bound` if nothing more is recorded (0 when
        within it); Kafka's QuotaUtils.throttleTime."""
        size = self.window_size(now)
        value = self._total / size if size > 0 else 0.0
        if bound <= 0:
            return math.inf if value > 0 else 0.0
        if value <= bound:
            return 0.0
        return (value - bound) / bound * size
