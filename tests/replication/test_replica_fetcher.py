"""The replica fetcher task over an in-memory leader, on Trio's mock clock."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.replication.fetched_records import FetchedBatches
from broker.replication.leader_epoch_cache import EpochEntry
from broker.replication.leader_fetch_session import FetchLimits
from broker.replication.replica_fetcher import ReplicaFetcher, ReplicaFetcherSettings
from broker.replication.replication_quota import UNBOUNDED, ReplicationQuotaManager
from broker.replication.topic_partition import TopicPartition
from tests.replication.fake_replicas import FakeLeader, MemoryLog
from tests.waiting import wait_until

TP = TopicPartition("orders", 0)
LEADER_ID = 1
WAIT_S = 600.0  # virtual seconds: the mock clock jumps while every task waits


@asynccontextmanager
async def fetching(
    leader: FakeLeader, settings: ReplicaFetcherSettings
) -> AsyncIterator[ReplicaFetcher]:
    fetcher = ReplicaFetcher(LEADER_ID, leader, settings)
    async with trio.open_nursery() as nursery:
        await nursery.start(fetcher.run)
        yield fetcher
        nursery.cancel_scope.cancel()


def diverged_logs(
    shared: int, follower_only: int, copied: int, leader_only: int
) -> tuple[MemoryLog, MemoryLog]:
    """Both wrote `shared` batches in epoch 0; the follower then led epoch 1 and wrote
    `follower_only` batches, of which the leader copied the first `copied`; the leader
    now leads epoch 2 and wrote `leader_only` more."""
    leader, follower = MemoryLog(), MemoryLog()
    for i in range(shared):
        leader.append_as_leader(0, b"s%d" % i)
        follower.append_as_leader(0, b"s%d" % i)
    for i in range(follower_only):
        follower.append_as_leader(1, b"f%d" % i, b"g%d" % i)
        if i < copied:
            leader.append_as_leader(1, b"f%d" % i, b"g%d" % i)
    for i in range(leader_only):
        leader.append_as_leader(2, b"l%d" % i)
    follower.update_high_watermark(shared)
    leader.update_high_watermark(leader.log_end_offset)
    return leader, follower


async def test_a_diverged_follower_truncates_to_the_last_shared_epoch_then_copies_the_leader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leader, follower = diverged_logs(shared=3, follower_only=2, copied=1, leader_only=2)
    session = FakeLeader({TP: leader}, {TP: 2})
    async with fetching(session, ReplicaFetcherSettings()) as fetcher:
        fetcher.add_partition(TP, follower, leader_epoch=2)
        await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
        assert follower.epoch_cache.entries == (
            EpochEntry(0, 0),
            EpochEntry(1, 3),
            EpochEntry(2, 5),
        )
        await wait_until(lambda: follower.high_watermark == leader.high_watermark, WAIT_S)
        # New records reach the follower through the leader's long poll.
        leader.append_as_leader(2, b"later")
        await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
    assert [name for name, _ in session.calls][:2] == ["OffsetsForLeaderEpoch", "Fetch"]


async def test_requests_that_fail_are_retried_after_replica_fetch_backoff_ms(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leader, follower = diverged_logs(shared=2, follower_only=0, copied=0, leader_only=1)
    session = FakeLeader({TP: leader}, {TP: 2}, failures=3)
    async with fetching(session, ReplicaFetcherSettings(replica_fetch_backoff_ms=250)) as fetcher:
        fetcher.add_partition(TP, follower, leader_epoch=2)
        await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
    times = [t for _, t in session.calls]
    assert len(times) >= 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(times[:4])]
    assert all(gap >= 0.25 for gap in gaps), gaps  # each failure waited out its back-off


async def test_a_fenced_partition_stops_until_the_controller_names_a_newer_epoch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leader, follower = diverged_logs(shared=2, follower_only=0, copied=0, leader_only=2)
    session = FakeLeader({TP: leader}, {TP: 2})
    async with fetching(session, ReplicaFetcherSettings()) as fetcher:
        fetcher.add_partition(TP, follower, leader_epoch=1)  # an older LeaderAndIsr
        await wait_until(lambda: TP in fetcher.fenced, WAIT_S)
        assert TP not in fetcher.partitions
        assert follower.log_end_offset == 2
        fetcher.add_partition(TP, follower, leader_epoch=2)
        await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
        assert not fetcher.fenced


class CorruptingLog(MemoryLog):
    """A follower whose log refuses what the leader sends, as the broker's log does
    a batch that fails its checks."""

    async def append_as_follower(self, batches: FetchedBatches) -> None:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "bad CRC")


async def test_a_partition_whose_log_refuses_the_leaders_batches_is_set_aside_not_the_fetcher(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    other = TopicPartition("orders", 1)
    leader, follower = diverged_logs(shared=2, follower_only=0, copied=0, leader_only=2)
    healthy_leader, healthy = diverged_logs(shared=2, follower_only=0, copied=0, leader_only=2)
    refusing = CorruptingLog()
    session = FakeLeader({TP: leader, other: healthy_leader}, {TP: 2, other: 2})
    async with fetching(session, ReplicaFetcherSettings()) as fetcher:
        fetcher.add_partition(TP, refusing, leader_epoch=2)
        fetcher.add_partition(other, healthy, leader_epoch=2)
        await wait_until(lambda: TP in fetcher.failed, WAIT_S)
        assert TP not in fetcher.partitions
        set_aside = [r for r in caplog.records if "set aside" in r.getMessage()]
        assert [r.levelno for r in set_aside] == [logging.ERROR]
        assert str(TP) in set_aside[0].getMessage() and "bad CRC" in set_aside[0].getMessage()
        await wait_until(lambda: healthy.contents() == healthy_leader.contents(), WAIT_S)
        fetcher.add_partition(TP, follower, leader_epoch=2)  # the next LeaderAndIsr
        await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
        assert not fetcher.failed


async def test_a_follower_behind_the_leaders_log_start_starts_over_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leader, follower = MemoryLog(), MemoryLog()
    await leader.truncate_fully_and_start_at(10)  # the leader deleted offsets 0 to 9
    leader.append_as_leader(3, b"a", b"b")
    follower.append_as_leader(0, b"old")
    follower.update_high_watermark(1)
    session = FakeLeader({TP: leader}, {TP: 3})
    async with fetching(session, ReplicaFetcherSettings()) as fetcher:
        fetcher.add_partition(TP, follower, leader_epoch=3)
        await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
    assert follower.log_start_offset == 10
    assert "ListOffsets" in [name for name, _ in session.calls]


@settings(max_examples=40, deadline=None)
@given(
    shared=st.integers(0, 4),
    follower_only=st.integers(0, 3),
    copied_share=st.integers(0, 3),
    leader_only=st.integers(0, 3),
    failures=st.integers(0, 2),
)
def test_after_fetching_the_follower_log_equals_the_leaders(
    shared: int, follower_only: int, copied_share: int, leader_only: int, failures: int
) -> None:
    copied = min(copied_share, follower_only)
    leader, follower = diverged_logs(shared, follower_only, copied, leader_only)
    session = FakeLeader({TP: leader}, {TP: 2}, failures=failures)

    async def main() -> None:
        async with fetching(session, ReplicaFetcherSettings()) as fetcher:
            fetcher.add_partition(TP, follower, leader_epoch=2)
            await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
            await wait_until(lambda: follower.high_watermark == leader.high_watermark, WAIT_S)
        assert follower.epoch_cache.entries == leader.epoch_cache.entries

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_throttled_partition_is_left_out_while_over_the_rate_and_the_others_go_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Kafka's follower throttle: the throttled partition copies at about the rate, the
    other one of the same fetcher at once; nothing waits for the throttled one."""
    throttled_leader, throttled = MemoryLog(), MemoryLog()
    free_leader, free = MemoryLog(), MemoryLog()
    for i in range(100):
        throttled_leader.append_as_leader(0, b"t%04d" % i + bytes(1000))
        free_leader.append_as_leader(0, b"f%04d" % i + bytes(1000))
    for log in (throttled_leader, free_leader):
        log.update_high_watermark(log.log_end_offset)
    other = TopicPartition("orders", 1)
    session = FakeLeader({TP: throttled_leader, other: free_leader}, {TP: 0, other: 0})
    bound, windows = 5_000, 2
    quota = ReplicationQuotaManager(bound, 1.0, windows, lambda tp: tp == TP)
    settings = ReplicaFetcherSettings(limits=FetchLimits(partition_max_bytes=4_000))
    fetcher = ReplicaFetcher(LEADER_ID, session, settings, quota)
    async with trio.open_nursery() as nursery:
        await nursery.start(fetcher.run)
        started = trio.current_time()
        fetcher.add_partition(TP, throttled, leader_epoch=0)
        fetcher.add_partition(other, free, leader_epoch=0)
        await wait_until(lambda: free.contents() == free_leader.contents(), WAIT_S)
        assert trio.current_time() - started < 1.0
        fetcher.remove_partition(other)  # alone, the throttled one sleeps out its throttle
        for _ in range(20):
            await trio.sleep(0.5)
            elapsed = trio.current_time() - started
            copied = sum(len(data) for _, _, data in throttled.contents())
            assert copied <= bound * (elapsed + windows) + 4_000, elapsed
        assert 0 < throttled.log_end_offset < throttled_leader.log_end_offset
        quota.update_quota(UNBOUNDED)  # lifted: the copy completes, the fetcher woken
        fetcher.wake()
        lifted = trio.current_time()
        await wait_until(lambda: throttled.contents() == throttled_leader.contents(), WAIT_S)
        assert trio.current_time() - lifted < 0.5
        nursery.cancel_scope.cancel()


async def test_a_fetcher_asleep_over_its_throttle_asks_again_as_soon_as_it_is_lifted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leader = MemoryLog()
    for i in range(10):
        leader.append_as_leader(0, b"t%04d" % i + bytes(1000))
    leader.update_high_watermark(leader.log_end_offset)
    follower = MemoryLog()
    quota = ReplicationQuotaManager(100, 1.0, 11, lambda tp: tp == TP)
    settings = ReplicaFetcherSettings(limits=FetchLimits(partition_max_bytes=2_000))
    fetcher = ReplicaFetcher(LEADER_ID, FakeLeader({TP: leader}, {TP: 0}), settings, quota)
    async with trio.open_nursery() as nursery:
        await nursery.start(fetcher.run)
        fetcher.add_partition(TP, follower, leader_epoch=0)
        await wait_until(lambda: follower.log_end_offset > 0, WAIT_S)
        await trio.sleep(1.0)
        assert quota.throttle_time(trio.current_time()) > 5  # asleep for that long
        quota.update_quota(UNBOUNDED)
        fetcher.wake()
        lifted = trio.current_time()
        await wait_until(lambda: follower.contents() == leader.contents(), WAIT_S)
        assert trio.current_time() - lifted < 0.5
        nursery.cancel_scope.cancel()
