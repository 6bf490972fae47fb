"""Rate-limited logging of closes a client can cause at will."""

from __future__ import annotations

import logging

import pytest

from broker.net.log_limiter import LogLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_beyond_the_burst_are_counted_and_reported_next_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    limiter = LogLimiter(logging.getLogger("test.limiter"), burst=3, interval_s=10.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="test.limiter"):
        for n in range(10):
            limiter.log(logging.INFO, "closing %d", n)
        assert [r.getMessage() for r in caplog.records] == ["closing 0", "closing 1", "closing 2"]
        assert limiter.suppressed == 7
        clock.now = 10.0
        limiter.log(logging.WARNING, "closing %d", 10)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[3:] == [
        "7 similar connection messages were not logged in the last 10 s",
        "closing 10",
    ]


def test_a_disabled_level_costs_nothing_and_counts_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limiter = LogLimiter(logging.getLogger("test.limiter.quiet"), burst=1)
    with caplog.at_level(logging.WARNING, logger="test.limiter.quiet"):
        for _ in range(5):
            limiter.log(logging.INFO, "closing")
    assert caplog.records == []
    assert limiter.suppressed == 0
