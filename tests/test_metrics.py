"""The in-process metrics registry and its time-based helpers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.metrics import (
    Gauge,
    Histogram,
    IdleTracker,
    Meter,
    MetricsRegistry,
    SampledRate,
    WindowedShare,
)
from broker.net.request import ClientInformation, NoOpResponse, Request, RequestContext
from broker.net.request_metrics import RequestMetrics
from broker.protocol.api import RequestHeader


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_meter_counts_and_rates_converge_to_the_event_rate() -> None:
    clock = FakeClock()
    meter = Meter(clock)
    for _ in range(600):
        meter.mark(10)
        clock.now += 1
    assert meter.count == 6000
    assert meter.rate() == pytest.approx(10, rel=0.05)
    assert meter.mean_rate() == pytest.approx(10, rel=0.01)


def test_meter_rate_decays_when_idle() -> None:
    clock = FakeClock()
    meter = Meter(clock)
    for _ in range(120):
        meter.mark()
        clock.now += 1
    busy = meter.rate()
    clock.now += 600
    assert meter.rate() < busy / 100


def test_histogram_tracks_count_mean_max_and_percentiles() -> None:
    h = Histogram()
    for v in range(1, 101):
        h.update(v)
    assert (h.count, h.mean, h.max, h.min) == (100, 50.5, 100, 1)
    assert h.percentile(0.5) == pytest.approx(50.5)
    assert h.percentile(0.99) == pytest.approx(99.01)
    with pytest.raises(ValueError):
        h.percentile(1.5)


def test_histogram_memory_is_bounded_but_totals_are_exact() -> None:
    h = Histogram(reservoir_size=10)
    for v in range(1000):
        h.update(v)
    assert h.count == 1000
    assert h.max == 999
    assert h.percentile(0.0) == 990


@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), max_size=40),
    st.integers(min_value=1, max_value=40),
)
def test_batched_updates_read_exactly_like_one_by_one(values: list[float], batch: int) -> None:
    one_by_one, batched = Histogram(reservoir_size=16), Histogram(reservoir_size=16)
    for v in values:
        one_by_one.update(v)
    for start in range(0, len(values), batch):
        batched.update_many(values[start : start + batch])
    for q in (0.0, 0.5, 1.0):
        assert batched.percentile(q) == one_by_one.percentile(q)
    assert (batched.count, batched.max, batched.min) == (
        one_by_one.count,
        one_by_one.max,
        one_by_one.min,
    )
    # Summed in C (compensated from Python 3.12 on): equal up to rounding.
    assert batched.mean == pytest.approx(one_by_one.mean, rel=1e-9, abs=1e-9)


def test_values_held_back_elsewhere_are_flushed_before_any_read() -> None:
    h = Histogram()
    held = [3.0, 5.0]

    def flush() -> None:
        h.update_many(held)
        held.clear()

    h.add_pending_source(flush)
    assert (h.count, h.max) == (2, 5.0)
    held.append(7.0)
    assert h.percentile(1.0) == 7.0
    held.append(1.0)
    assert (h.min, h.mean) == (1.0, 4.0)


def test_request_timings_reach_the_histograms_before_a_full_batch() -> None:
    registry = MetricsRegistry()
    metrics = RequestMetrics(registry)
    context = RequestContext("c", 0, "PLAINTEXT", "PLAINTEXT", "127.0.0.1", 1, ClientInformation())
    for size in (10, 30):
        header = RequestHeader(api_key=18, api_version=0, correlation_id=size, client_id="t")
        request = Request(header=header, body=None, context=context, size_bytes=size)
        metrics.record(request, NoOpResponse(request))
    sizes = registry.histogram(
        "kafka.network", "RequestMetrics", "RequestBytes", request="ApiVersions"
    )
    total = registry.histogram(
        "kafka.network", "RequestMetrics", "TotalTimeMs", request="ApiVersions"
    )
    assert (sizes.count, sizes.mean, sizes.max) == (2, 20.0, 30)
    assert total.count == 2
    assert total.min >= 0


def test_empty_histogram_reads_zero() -> None:
    h = Histogram()
    assert (h.count, h.mean, h.max, h.percentile(0.5)) == (0, 0.0, 0.0, 0.0)


def test_gauge_reads_live_values() -> None:
    values = [1.0]
    gauge = Gauge(lambda: values[0])
    values[0] = 7
    assert gauge.value == 7


def test_registry_get_or_create_is_keyed_by_name_and_tags() -> None:
    registry = MetricsRegistry()
    m = registry.meter(
        "kafka.network", "RequestMetrics", "RequestsPerSec", request="Produce", version="9"
    )
    again = registry.meter(
        "kafka.network", "RequestMetrics", "RequestsPerSec", version="9", request="Produce"
    )
    other = registry.meter("kafka.network", "RequestMetrics", "RequestsPerSec", request="Fetch")
    assert m is again
    assert m is not other
    assert (
        registry.get("kafka.network", "RequestMetrics", "RequestsPerSec", request="Fetch") is other
    )


def test_registry_refuses_a_name_registered_as_another_kind() -> None:
    registry = MetricsRegistry()
    registry.meter("g", "t", "n")
    with pytest.raises(TypeError):
        registry.histogram("g", "t", "n")


def test_gauges_are_replaced_and_metrics_removed() -> None:
    registry = MetricsRegistry()
    registry.gauge("kafka.network", "RequestChannel", "RequestQueueSize", lambda: 1)
    registry.gauge("kafka.network", "RequestChannel", "RequestQueueSize", lambda: 2)
    (sample,) = registry.snapshot()
    assert sample.values == {"value": 2}
    registry.remove("kafka.network", "RequestChannel", "RequestQueueSize")
    assert registry.snapshot() == []


def test_snapshot_reports_every_kind() -> None:
    registry = MetricsRegistry(FakeClock())
    registry.meter("g", "t", "m", request="Produce").mark(3)
    registry.histogram("g", "t", "h").update(5)

    def broken() -> float:
        raise RuntimeError

    registry.gauge("g", "t", "z", broken)
    samples = {s.name: s for s in registry.snapshot()}
    assert samples["m"].kind == "meter"
    assert samples["m"].tags == (("request", "Produce"),)
    assert samples["m"].values["count"] == 3
    assert samples["h"].values["p99"] == 5
    assert math.isnan(samples["z"].values["value"])


def test_sampled_rate_uses_at_least_samples_minus_one_windows() -> None:
    clock = FakeClock()
    rate = SampledRate(1.0, 11, clock)
    for _ in range(20):
        rate.record()
    assert rate.measure() == pytest.approx(20 / 10)
    assert rate.throttle_time(1.0) == pytest.approx((2 - 1) / 1 * 10)
    assert rate.throttle_time(5.0) == 0


def test_sampled_rate_forgets_old_windows() -> None:
    clock = FakeClock()
    rate = SampledRate(1.0, 3, clock)
    rate.record(10)
    clock.now += 10
    assert rate.measure() == 0


def test_idle_tracker_reports_the_idle_fraction() -> None:
    clock = FakeClock()
    tracker = IdleTracker(window_s=1.0, samples=10, clock=clock)
    for _ in range(20):
        with tracker.idle():
            clock.now += 0.25
        clock.now += 0.75
    assert tracker.fraction() == pytest.approx(0.25, abs=0.05)


def test_idle_tracker_counts_an_open_idle_span() -> None:
    clock = FakeClock()
    tracker = IdleTracker(window_s=1.0, samples=5, clock=clock)
    with tracker.idle():
        clock.now += 60
        assert tracker.fraction() == 1.0


def test_weighted_idle_time_is_a_fraction_of_the_pool() -> None:
    clock = FakeClock()
    tracker = IdleTracker(window_s=1.0, samples=5, clock=clock)
    for _ in range(10):
        tracker.record(1.0, weight=1 / 4)  # one of four handlers idle all the time
        clock.now += 1
    assert tracker.fraction() == pytest.approx(0.25, abs=0.05)


class FakeNanoClock:
    def __init__(self) -> None:
        self.now = 10**12

    def __call__(self) -> int:
        return self.now


def test_windowed_share_does_not_change_when_read() -> None:
    clock = FakeNanoClock()
    share = WindowedShare(window_s=30.0, clock_ns=clock)
    clock.now += 10 * 10**9
    readings = [share.share(4 * 10**9) for _ in range(5)]
    assert readings == [pytest.approx(0.4)] * 5


def test_windowed_share_forgets_what_is_older_than_about_a_window() -> None:
    clock = FakeNanoClock()
    share = WindowedShare(window_s=10.0, clock_ns=clock)
    busy = 0
    for _ in range(40):  # 20 s fully busy, then 20 s idle, read every second
        clock.now += 10**9
        busy += 10**9 if clock.now - 10**12 <= 20 * 10**9 else 0
        share.share(busy)
    assert share.share(busy) < 0.1
    for _ in range(20):  # busy again
        clock.now += 10**9
        busy += 10**9
        share.share(busy)
    assert share.share(busy) > 0.9


def test_windowed_share_is_a_fraction_of_the_capacity() -> None:
    clock = FakeNanoClock()
    share = WindowedShare(window_s=30.0, clock_ns=clock)
    clock.now += 10**9
    assert share.share(2 * 10**9, capacity=4) == pytest.approx(0.5)
