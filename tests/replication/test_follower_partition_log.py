"""The replica fetcher over the broker's own PartitionLog as the follower's log
(broker/log/follower_log.py): a follower whose history diverged from the leader's
truncates on disk (KIP-101) and catches up, ending byte for byte equal to the leader."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.handlers.offset_for_leader_epoch import epoch_end_offset
from broker.log.follower_log import PartitionFollowerLog
from broker.log.log_config import LogConfig
from broker.log.partition_log import PartitionLog
from broker.protocol.messages.offset_for_leader_epoch_request import OffsetForLeaderPartition
from broker.protocol.record_batch import batch_checks
from broker.protocol.record_batch.layout import Buffer, crc_of
from broker.protocol.records import InvalidRecordsError
from broker.replication.fetched_records import fetched_batches
from broker.replication.leader_fetch_session import FetchLimits
from broker.replication.replica_fetcher import ReplicaFetcher, ReplicaFetcherSettings
from broker.replication.topic_partition import TopicPartition
from tests.log.helpers import stored_bytes
from tests.replication.fake_replicas import TIMESTAMP_MS, FakeLeader, MemoryLog
from tests.waiting import wait_until

TP = TopicPartition("orders", 0)
WAIT_S = 20.0
FAST = ReplicaFetcherSettings(
    replica_fetch_backoff_ms=10, limits=FetchLimits(max_wait_ms=20, partition_max_bytes=300)
)
SMALL_SEGMENTS = LogConfig(
    segment_bytes=250,
    segment_ms=2**62,
    retention_ms=-1,
    retention_bytes=-1,
    index_interval_bytes=100,
    flush_messages=2**62,
    flush_ms=2**62,
    max_message_bytes=1 << 20,
    log_append_time=False,
    delete_enabled=True,
    segment_index_bytes=10 * 1024 * 1024,
)


async def partition_log_copy(directory: Path, source: MemoryLog) -> PartitionLog:
    """A PartitionLog holding `source`'s batches as they are (its own earlier history)."""
    log = await trio.to_thread.run_sync(
        lambda: PartitionLog.create(
            TP.topic, TP.partition, directory, SMALL_SEGMENTS, clock=lambda: TIMESTAMP_MS
        )
    )
    for stored in source.batches:
        await log.append_as_follower(stored.data)
    log.update_high_watermark(source.high_watermark)
    return log


async def follow(leader: MemoryLog, log: PartitionLog, leader_epoch: int, failures: int) -> None:
    session = FakeLeader({TP: leader}, {TP: leader_epoch}, failures=failures)
    follower = PartitionFollowerLog(log)
    fetcher = ReplicaFetcher(1, session, FAST)
    async with trio.open_nursery() as nursery:
        await nursery.start(fetcher.run)
        fetcher.add_partition(TP, follower, leader_epoch=leader_epoch)
        await wait_until(
            lambda: (
                (log.log_end_offset, log.high_watermark)
                == (leader.log_end_offset, leader.high_watermark)
            ),
            WAIT_S,
        )
        nursery.cancel_scope.cancel()


def histories() -> st.SearchStrategy[tuple[list[int], list[int], int, list[int], int]]:
    """Batches per epoch: shared by both, then epochs only the follower led (the
    leader copied some batches of the first), then the leader's own epoch."""
    runs = st.lists(st.integers(1, 3), max_size=3)
    return st.tuples(
        runs, runs, st.integers(0, 3), st.lists(st.integers(0, 4), max_size=1), st.integers(0, 1)
    )


def diverged(
    shared: list[int], follower_runs: list[int], copied: int, leader_runs: list[int]
) -> tuple[MemoryLog, MemoryLog, int]:
    leader, follower = MemoryLog(), MemoryLog()
    epoch = 0
    for batches in shared:
        for i in range(batches):
            values = [b"s%d-%d-%d" % (epoch, i, n) for n in range(1 + i % 3)]
            leader.append_as_leader(epoch, *values)
            follower.append_as_leader(epoch, *values)
        epoch += 1
    follower.update_high_watermark(follower.log_end_offset)
    for run, batches in enumerate(follower_runs):
        for i in range(batches):
            values = [b"f%d-%d-%d" % (epoch, i, n) for n in range(1 + (i + 1) % 3)]
            follower.append_as_leader(epoch, *values)
            if run == 0 and i < copied:
                leader.append_as_leader(epoch, *values)
        epoch += 1
    for batches in leader_runs or [1]:
        for i in range(batches):
            leader.append_as_leader(epoch, *(b"l%d-%d" % (i, n) for n in range(1 + i % 2)))
    leader.update_high_watermark(leader.log_end_offset)
    return leader, follower, epoch


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_a_diverged_follower_log_truncates_on_disk_and_ends_equal_to_the_leaders(
    history: tuple[list[int], list[int], int, list[int], int],
) -> None:
    shared, follower_runs, copied, leader_runs, failures = history
    leader, follower_history, leader_epoch = diverged(shared, follower_runs, copied, leader_runs)

    async def main(directory: Path) -> None:
        log = await partition_log_copy(directory, follower_history)
        await follow(leader, log, leader_epoch, failures)
        expected = b"".join(b.data for b in leader.batches)
        assert await stored_bytes(log) == expected
        assert log.epoch_cache.entries == leader.epoch_cache.entries
        log.close(clean=False)
        # What is on disk, reloaded after a crash, is the same log.
        reloaded = await trio.to_thread.run_sync(
            lambda: PartitionLog.load(
                TP.topic,
                TP.partition,
                directory,
                SMALL_SEGMENTS,
                clock=lambda: TIMESTAMP_MS,
                clean=False,
                recovery_point=0,
                log_start_offset=0,
            )
        )
        try:
            assert await stored_bytes(reloaded) == expected
            assert reloaded.epoch_cache.entries == leader.epoch_cache.entries
        finally:
            reloaded.close(clean=True)

    with tempfile.TemporaryDirectory() as directory:
        trio.run(main, Path(directory) / "orders-0")


async def test_a_follower_behind_the_leaders_log_start_starts_its_log_over_there(
    tmp_path: Path,
) -> None:
    leader, history = MemoryLog(), MemoryLog()
    await leader.truncate_fully_and_start_at(10)  # the leader deleted offsets 0 to 9
    leader.append_as_leader(3, b"a", b"b")
    leader.update_high_watermark(12)
    history.append_as_leader(0, b"old")
    log = await partition_log_copy(tmp_path / "orders-0", history)
    await follow(leader, log, 3, failures=0)
    assert log.log_start_offset == 10
    assert await stored_bytes(log) == leader.batches[0].data
    assert fetched_batches(await stored_bytes(log)).epoch_starts == leader.epoch_cache.entries
    log.close(clean=True)


async def test_offset_for_leader_epoch_answers_from_the_logs_epoch_cache(tmp_path: Path) -> None:
    history = MemoryLog()
    for epoch in (0, 0, 1, 1, 3):
        history.append_as_leader(epoch, b"v")
    log = await partition_log_copy(tmp_path / "orders-0", history)
    log.leader_epoch = 3

    def answer(leader_epoch: int) -> tuple[int, int]:
        wanted = OffsetForLeaderPartition(
            partition=0, current_leader_epoch=3, leader_epoch=leader_epoch
        )
        found = epoch_end_offset(log, wanted)
        return found.leader_epoch, found.end_offset

    assert answer(0) == (0, 2)
    assert answer(1) == (1, 4)
    assert answer(2) == (1, 4)  # this replica never saw epoch 2: epoch 1 ended at 4
    assert answer(3) == (3, 5)
    assert answer(4) == (-1, -1)
    log.close(clean=True)


async def test_a_fetched_batch_has_its_crc_computed_once_on_the_way_to_the_followers_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's follower validates a fetched batch once; the fetcher's check is the one
    (a corrupt answer is refused there, before the log sees it)."""
    leader = MemoryLog()
    for epoch in (0, 0, 2):
        leader.append_as_leader(epoch, b"v", b"w")
    answer = b"".join(stored.data for stored in leader.batches)
    computed: list[int] = []

    def counted_crc(buf: Buffer, pos: int, end: int) -> int:
        computed.append(pos)
        return crc_of(buf, pos, end)

    monkeypatch.setattr(batch_checks, "crc_of", counted_crc)
    log = await partition_log_copy(tmp_path / "orders-0", MemoryLog())
    computed.clear()
    await PartitionFollowerLog(log).append_as_follower(fetched_batches(answer))
    assert len(computed) == len(leader.batches)
    log.update_high_watermark(log.log_end_offset)
    assert await stored_bytes(log) == answer
    corrupt = bytearray(answer)
    corrupt[-1] ^= 0xFF
    with pytest.raises(InvalidRecordsError):
        fetched_batches(corrupt)
    log.close(clean=True)
