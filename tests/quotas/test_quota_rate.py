"""QuotaRate is the request path's copy of Kafka's Rate: it must measure what
broker.metrics.SampledRate (the reference shape) measures, whatever the history."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.metrics import SampledRate
from broker.quotas.quota_rate import QuotaRate

steps = st.lists(
    st.tuples(
        st.floats(0, 3, allow_nan=False),  # time advance, in windows
        st.floats(-100, 10_000, allow_nan=False),  # value (negative: an unrecord)
        st.booleans(),  # measure after recording
    ),
    max_size=60,
)


@given(
    steps=steps,
    samples=st.integers(1, 12),
    window_s=st.sampled_from([0.5, 1.0, 2.0]),
    bound=st.floats(1, 1e4),
)
def test_quota_rate_measures_what_sampled_rate_measures(
    steps: list[tuple[float, float, bool]], samples: int, window_s: float, bound: float
) -> None:
    fast = QuotaRate(window_s, samples)
    reference = SampledRate(window_s, samples, clock=lambda: 0.0)
    now = 100.0
    for advance, value, check in steps:
        now += advance * window_s
        fast.record(value, now)
        reference.record(value, now)
        if check:
            assert fast.window_size(now) == pytest.approx(reference.window_size(now))
            assert fast.measure(now) == pytest.approx(reference.measure(now), rel=1e-9, abs=1e-6)
            assert fast.throttle_time(bound, now) == pytest.approx(
                reference.throttle_time(bound, now), rel=1e-9, abs=1e-6
            )
    now += 1.5 * window_s
    assert fast.measure(now) == pytest.approx(reference.measure(now), rel=1e-9, abs=1e-6)


def test_an_empty_rate_measures_zero_over_the_minimum_span() -> None:
    rate = QuotaRate(1.0, 11)
    assert rate.measure(5.0) == 0.0
    assert rate.window_size(5.0) == 10.0
