"""The reassignment throttle's quota logic, sans-IO (Kafka's ReplicationQuotaManager)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.replication.replication_quota import (
    UNBOUNDED,
    ReplicationQuotaManager,
    ThrottledReplicas,
    parse_throttled_replicas,
)
from broker.replication.topic_partition import TopicPartition

TP = TopicPartition("moving", 0)


def test_throttled_replica_lists_are_read_as_kafka_writes_them() -> None:
    listed = parse_throttled_replicas("0:1, 0:2,1:3")
    assert listed == ThrottledReplicas(replicas=frozenset({(0, 1), (0, 2), (1, 3)}))
    assert listed.throttles(0, 2) and not listed.throttles(1, 2)
    assert listed.partitions_of(1) == frozenset({0})
    every = parse_throttled_replicas(" * ")
    assert every.throttles(7, 9) and every.partitions_of(9) is None
    assert parse_throttled_replicas("") == ThrottledReplicas()
    for bad in ("0-1", "a:1", "0:1:2", "*,0:1"):
        with pytest.raises(ValueError, match="partition:broker"):
            parse_throttled_replicas(bad)


def test_an_unbounded_quota_never_throttles_however_much_is_recorded() -> None:
    quota = ReplicationQuotaManager(UNBOUNDED, 1.0, 11, lambda _tp: True)
    quota.record(10**15, now=0.0)
    assert not quota.is_quota_exceeded(0.5)
    assert not quota.should_throttle(TP, in_sync=False, now=0.5)
    assert quota.throttle_time(0.5) == 0.0


def test_only_listed_replicas_out_of_sync_are_held_back_and_a_lifted_bound_frees_them() -> None:
    quota = ReplicationQuotaManager(1000, 1.0, 11, lambda tp: tp.partition == 0)
    quota.record(100_000, now=0.0)
    assert quota.should_throttle(TP, in_sync=False, now=1.0)
    assert not quota.should_throttle(TP, in_sync=True, now=1.0)  # the ISR is never slowed
    assert not quota.should_throttle(TopicPartition("moving", 1), in_sync=False, now=1.0)
    assert quota.throttle_time(1.0) > 0
    quota.update_quota(UNBOUNDED)
    assert not quota.should_throttle(TP, in_sync=False, now=1.0)


@settings(max_examples=40, deadline=None)
@given(
    bound=st.integers(min_value=1_000, max_value=1_000_000),
    sizes=st.lists(st.integers(min_value=1, max_value=200_000), min_size=1, max_size=200),
    step_ms=st.integers(min_value=10, max_value=500),
)
def test_sending_only_when_not_over_quota_keeps_the_rate_near_the_bound(
    bound: int, sizes: list[int], step_ms: int
) -> None:
    """A sender that asks before each send (as the leader and the follower do) moves at
    most the bound over the time passed plus the span the rate forgets after (samples
    windows), plus one send crossing it per span."""
    window_s, samples = 1.0, 11
    quota = ReplicationQuotaManager(bound, window_s, samples, lambda _tp: True)
    now, sent = 0.0, 0
    pending = list(sizes)
    while pending and now < 30:
        if not quota.should_throttle(TP, in_sync=False, now=now):
            size = pending.pop(0)
            quota.record(size, now)
            sent += size
        # Kafka's Rate measures over a span between (samples - 1) and samples windows.
        ceiling = (bound * samples * window_s + max(sizes)) / ((samples - 1) * window_s)
        assert quota.rate(now) <= ceiling
        now += step_ms / 1000
        # A follower holding only throttled partitions sleeps this long: some time
        # exactly while over the bound.
        assert (quota.throttle_time(now) > 0) == quota.is_quota_exceeded(now)
    # The rate forgets a sample after the whole span: one send may cross the bound in
    # each span.
    spans = now // (samples * window_s) + 1
    assert sent <= bound * (now + samples * window_s) + max(sizes) * spans


def test_a_zero_rate_holds_a_throttled_replica_back_for_at_most_the_rates_span() -> None:
    quota = ReplicationQuotaManager(0, 1.0, 3, lambda _tp: True)
    assert not quota.should_throttle(TP, in_sync=False, now=0.0)  # nothing sent yet
    quota.record(1, now=0.0)
    assert quota.should_throttle(TP, in_sync=False, now=0.5)
    assert quota.throttle_time(0.5) == 3.0  # not forever: a follower wakes to ask again
    assert not quota.should_throttle(TP, in_sync=False, now=3.0)  # the sample expired
