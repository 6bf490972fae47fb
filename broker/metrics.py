"""In-process metrics under Kafka's names (spec §7), without dependencies.

Kafka exposes Yammer meters/histograms/gauges keyed by group, type, name and
tags, plus windowed "Kafka metrics" rates used for quotas and idle ratios. This
module keeps both shapes so that a Prometheus exporter can later publish the
exact names operators' dashboards already use. All time sources are
injectable so tests never sleep.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import attrs

Clock = Callable[[], float]
TagKey = tuple[tuple[str, str], ...]

_TICK_S = 5.0
_M1_ALPHA = 1.0 - math.exp(-_TICK_S / 60.0)


class Meter:
    """A count plus a one-minute exponentially weighted rate, like Yammer's Meter
    (ticks every 5 s), so rates match what Kafka's JMX OneMinuteRate shows."""

    __slots__ = ("_clock", "_count", "_initialized", "_last_tick", "_rate", "_start", "_uncounted")

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._count = 0.0
        self._uncounted = 0.0
        self._rate = 0.0
        self._initialized = False
        self._start = self._last_tick = clock()

    def _tick_if_needed(self) -> None:
        now = self._clock()
        ticks = int((now - self._last_tick) // _TICK_S)
        if ticks <= 0:
            return
        self._last_tick += ticks * _TICK_S
        instant = self._uncounted / _TICK_S
        self._uncounted = 0.0
        if self._initialized:
            self._rate += _M1_ALPHA * (instant - self._rate)
        else:
            self._rate = instant
            self._initialized = True
        # The remaining ticks saw no events: pure decay.
        self._rate *= (1.0 - _M1_ALPHA) ** (ticks - 1)

    def mark(self, n: float = 1) -> None:
        self._tick_if_needed()
        self._count += n
        self._uncounted += n

    @property
    def count(self) -> float:
        return self._count

    def rate(self) -> float:
        """Events per second, one-minute exponentially weighted."""
        self._tick_if_needed()
        return self._rate

    def mean_rate(self) -> float:
        elapsed = self._clock() - self._start
        return self._count / elapsed if elapsed > 0 else 0.0


class Histogram:
    """Exact count, mean and max, with percentiles over the most recent
    `reservoir_size` values so memory stays bounded on long-running brokers.

    A hot path may hold values back and hand them over in batches (`update_many`);
    it registers a `flush` (`add_pending_source`) that every read calls first, so
    readers always see every value."""

    __slots__ = ("_count", "_max", "_min", "_pending_sources", "_recent", "_sum")

    def __init__(self, reservoir_size: int = 1028) -> None:
        self._recent: deque[float] = deque(maxlen=reservoir_size)
        self._count = 0
        self._sum = 0.0
        self._max = -math.inf
        self._min = math.inf
        self._pending_sources: tuple[Callable[[], None], ...] = ()

    def update(self, value: float) -> None:
        self._recent.append(value)
        self._count += 1
        self._sum += value
        if value > self._max:
            self._max = value
        if value < self._min:
            self._min = value

    def update_many(self, values: Sequence[float]) -> None:
        """`update` each value in order, in one call."""
        if not values:
            return
        self._recent.extend(values)
        self._count += len(values)
        self._sum = sum(values, self._sum)
        high = max(values)
        if high > self._max:
            self._max = high
        low = min(values)
        if low < self._min:
            self._min = low

    def add_pending_source(self, flush: Callable[[], None]) -> None:
        """`flush` hands over values held back elsewhere; it runs before every read."""
        self._pending_sources += (flush,)

    def _catch_up(self) -> None:
        for flush in self._pending_sources:
            flush()

    @property
    def count(self) -> int:
        self._catch_up()
        return self._count

    @property
    def mean(self) -> float:
        self._catch_up()
        return self._sum / self._count if self._count else 0.0

    @property
    def max(self) -> float:
        self._catch_up()
        return self._max if self._count else 0.0

    @property
    def min(self) -> float:
        self._catch_up()
        return self._min if self._count else 0.0

    def percentile(self, q: float) -> float:
        """The q-quantile (0 <= q <= 1) of recent values, linearly interpolated."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be within [0, 1], got {q}")
        self._catch_up()
        if not self._recent:
            return 0.0
        values = sorted(self._recent)
        position = q * (len(values) - 1)
        low = math.floor(position)
        high = min(low + 1, len(values) - 1)
        return values[low] + (values[high] - values[low]) * (position - low)


class Gauge:
    """A value computed on demand, so queue sizes and pool levels are read live."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], float]) -> None:
        self._fn = fn

    @property
    def value(self) -> float:
        return float(self._fn())


class SampledRate:
    """Kafka's `Rate` over a `SampledStat`: a sum over `samples` windows of
    `window_s` seconds divided by the elapsed span (at least samples-1 windows).

    Connection-rate quotas depend on this exact shape: the throttle delay is
    derived from how far the measured rate is above the bound.
    """

    __slots__ = ("_clock", "_current", "_samples", "samples", "window_s")

    def __init__(self, window_s: float, samples: int, clock: Clock = time.monotonic) -> None:
        if window_s <= 0 or samples < 1:
            raise ValueError("window_s must be > 0 and samples >= 1")
        self.window_s = window_s
        self.samples = samples
        self._clock = clock
        self._samples: list[list[float]] = []  # [window start, value]
        self._current = 0

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def _purge(self, now: float) -> None:
        expire_age = self.samples * self.window_s
        for sample in self._samples:
            if now - sample[0] >= expire_age:
                sample[0], sample[1] = now, 0.0

    def _current_sample(self, now: float) -> list[float]:
        if not self._samples:
            self._samples.append([now, 0.0])
            self._current = 0
        sample = self._samples[self._current]
        if now - sample[0] >= self.window_s:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append([now, 0.0])
            else:
                self._samples[self._current][:] = [now, 0.0]
            sample = self._samples[self._current]
        return sample

    def record(self, value: float = 1.0, now: float | None = None) -> None:
        t = self._now(now)
        self._current_sample(t)[1] += value

    def unrecord(self, value: float = 1.0, now: float | None = None) -> None:
        self.record(-value, now)

    def window_size(self, now: float | None = None) -> float:
        t = self._now(now)
        self._purge(t)
        oldest = min((s[0] for s in self._samples), default=t)
        elapsed = t - oldest
        full_windows = int(elapsed // self.window_s)
        min_full = self.samples - 1
        if full_windows < min_full:
            elapsed += (min_full - full_windows) * self.window_s
        return elapsed

    def total(self, now: float | None = None) -> float:
        self._purge(self._now(now))
        return sum(s[1] for s in self._samples)

    def measure(self, now: float | None = None) -> float:
        t = self._now(now)
        size = self.window_size(t)
        return self.total(t) / size if size > 0 else 0.0

    def throttle_time(self, bound: float, now: float | None = None) -> float:
        """Seconds to wait so the rate falls back to `bound` (0 when within it);
        Kafka's QuotaUtils.throttleTime."""
        t = self._now(now)
        value = self.measure(t)
        if bound <= 0:
            return math.inf if value > 0 else 0.0
        if value <= bound:
            return 0.0
        return (value - bound) / bound * self.window_size(t)


class IdleTracker:
    """The fraction of time spent idle (or blocked) over a recent window.

    Kafka's NetworkProcessorAvgIdlePercent, RequestHandlerAvgIdlePercent and
    AcceptorBlockedPercent are all "time spent in a state per unit of time".
    Time can be recorded after the fact or by an `idle()` span, which also
    counts while it is still open so a task parked for minutes reads as idle.
    A shared tracker (e.g. the handler pool) records with a weight of
    1/pool-size so the result stays a fraction of the whole pool.
    """

    __slots__ = ("_clock", "_ids", "_ongoing", "_rate")

    def __init__(self, window_s: float = 30.0, samples: int = 2, clock: Clock = time.monotonic):
        self._clock = clock
        self._rate = SampledRate(window_s, samples, clock)
        self._ongoing: dict[int, tuple[float, float]] = {}
        self._ids = itertools.count()

    def record(self, seconds: float, weight: float = 1.0) -> None:
        if seconds > 0:
            self._rate.record(seconds * weight)

    @contextmanager
    def idle(self, weight: float = 1.0) -> Iterator[None]:
        token = next(self._ids)
        start = self._clock()
        self._ongoing[token] = (start, weight)
        try:
            yield
        finally:
            del self._ongoing[token]
            self.record(self._clock() - start, weight)

    def fraction(self) -> float:
        now = self._clock()
        size = self._rate.window_size(now)
        if size <= 0:
            return 0.0
        ongoing = sum(weight * min(now - start, size) for start, weight in self._ongoing.values())
        return max(0.0, min(1.0, (self._rate.total(now) + ongoing) / size))


class WindowedShare:
    """The share of elapsed time a cumulative counter grew by, over roughly the last window.

    The hot path only adds nanoseconds to a plain integer it owns; this class keeps
    time-stamped marks of that counter and answers from the newest mark at least one
    window old. Reading never resets anything, so a scrape, a test and a dashboard see the
    same value, and the answer depends on time, not on how often it is read.
    """

    __slots__ = ("_clock_ns", "_marks", "_window_ns")

    def __init__(
        self, window_s: float = 30.0, clock_ns: Callable[[], int] = time.perf_counter_ns
    ) -> None:
        self._clock_ns = clock_ns
        self._window_ns = int(window_s * 1e9)
        self._marks: deque[tuple[int, int]] = deque([(clock_ns(), 0)])

    def share(self, cumulative_ns: int, capacity: int = 1) -> float:
        """`cumulative_ns` is the counter now; `capacity` how many tasks add to it."""
        now = self._clock_ns()
        marks = self._marks
        if now - marks[-1][0] >= self._window_ns // 2:
            marks.append((now, cumulative_ns))
        while len(marks) > 1 and now - marks[1][0] >= self._window_ns:
            marks.popleft()
        since, base = marks[0]
        elapsed = max(now - since, 1) * max(capacity, 1)
        return max(0.0, min(1.0, (cumulative_ns - base) / elapsed))


@attrs.frozen
class MetricSample:
    """One metric's values at snapshot time, ready for an exporter."""

    group: str
    type_: str
    name: str
    tags: TagKey
    kind: str  # "meter" | "histogram" | "gauge"
    values: Mapping[str, float] = attrs.field(hash=False)


Metric = Meter | Histogram | Gauge
_MetricKey = tuple[str, str, str, TagKey]


def _key(group: str, type_: str, name: str, tags: Mapping[str, str]) -> _MetricKey:
    return (group, type_, name, tuple(sorted((k, str(v)) for k, v in tags.items())))


class MetricsRegistry:
    """Get-or-create registry keyed like Kafka's MBean names, e.g.
    ("kafka.network", "RequestMetrics", "RequestsPerSec", request="Produce")."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._metrics: dict[_MetricKey, Metric] = {}
        self._collectors: list[Callable[[], Iterable[MetricSample]]] = []

    def add_collector(self, collect: Callable[[], Iterable[MetricSample]]) -> None:
        """Samples computed at snapshot time, for sets that come and go (partitions,
        groups): nothing to register or remove as they appear and disappear."""
        self._collectors.append(collect)

    def _get_or_create(self, key: _MetricKey, kind: type[Meter] | type[Histogram]) -> Metric:
        existing = self._metrics.get(key)
        if existing is None:
            existing = Meter(self._clock) if kind is Meter else Histogram()
            self._metrics[key] = existing
        elif not isinstance(existing, kind):
            raise TypeError(f"{key} is already registered as a {type(existing).__name__}")
        return existing

    def meter(self, group: str, type_: str, name: str, **tags: str) -> Meter:
        metric = self._get_or_create(_key(group, type_, name, tags), Meter)
        assert isinstance(metric, Meter)
        return metric

    def histogram(self, group: str, type_: str, name: str, **tags: str) -> Histogram:
        metric = self._get_or_create(_key(group, type_, name, tags), Histogram)
        assert isinstance(metric, Histogram)
        return metric

    def gauge(
        self, group: str, type_: str, name: str, fn: Callable[[], float], **tags: str
    ) -> Gauge:
        gauge = Gauge(fn)
        self._metrics[_key(group, type_, name, tags)] = gauge
        return gauge

    def remove(self, group: str, type_: str, name: str, **tags: str) -> None:
        self._metrics.pop(_key(group, type_, name, tags), None)

    def get(self, group: str, type_: str, name: str, **tags: str) -> Metric | None:
        return self._metrics.get(_key(group, type_, name, tags))

    def __len__(self) -> int:
        return len(self._metrics)

    def snapshot(self) -> list[MetricSample]:
        samples: list[MetricSample] = []
        for (group, type_, name, tags), metric in sorted(
            self._metrics.items(), key=lambda item: item[0]
        ):
            values: dict[str, float]
            if isinstance(metric, Meter):
                kind = "meter"
                values = {"count": metric.count, "rate": metric.rate()}
            elif isinstance(metric, Histogram):
                kind = "histogram"
                values = {
                    "count": float(metric.count),
                    "mean": metric.mean,
                    "max": metric.max,
                    "p50": metric.percentile(0.5),
                    "p99": metric.percentile(0.99),
                }
            else:
                kind = "gauge"
                try:
                    values = {"value": metric.value}
                except Exception:  # a broken gauge must not break the exporter
                    values = {"value": math.nan}
            samples.append(MetricSample(group, type_, name, tags, kind, values))
        for collect in self._collectors:
            try:
                samples.extend(collect())
            except Exception:  # a broken collector must not break the exporter
                continue
        samples.sort(key=lambda s: (s.group, s.type_, s.name, s.tags))
        return samples


__all__ = [
    "Gauge",
    "Histogram",
    "IdleTracker",
    "Meter",
    "MetricSample",
    "MetricsRegistry",
    "SampledRate",
    "WindowedShare",
]
