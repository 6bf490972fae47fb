"""A corrupt batch in a replica's log is repaired from an in-sync replica
(docs/corrupt-data.md): the log remembers where the loss starts, whether a read met it
or start-up's recovery left it; a follower cut there fetches the leader's copy and ends
byte for byte equal to it; a leader hands its partition to another live ISR member."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.handlers.replica_tracking import NO_REPLICATION
from broker.log.follower_log import PartitionFollowerLog
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import iter_batches
from broker.replication.corrupt_leader_hand_off import corrupt_leader_hand_off
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.replica_fetcher import ReplicaFetcher
from tests.replication.fake_replicas import TIMESTAMP_MS, FakeLeader, MemoryLog
from tests.replication.test_follower_partition_log import (
    FAST,
    SMALL_SEGMENTS,
    TP,
    partition_log_copy,
)
from tests.waiting import wait_until

EPOCH = 2
WAIT_S = 20.0


def leader_history(batches: int = 12) -> MemoryLog:
    leader = MemoryLog()
    for i in range(batches):
        leader.append_as_leader(EPOCH, *(b"r%02d-%d" % (i, n) for n in range(1 + i % 3)))
    leader.update_high_watermark(leader.log_end_offset)
    return leader


def batch_at(log: PartitionLog, segment_index: int, nth: int) -> tuple[int, int, int]:
    """(position, base offset, last offset) of the nth batch of a segment, from the file."""
    data = log.segments[segment_index].log_path.read_bytes()
    position = 0
    for i, (header, view) in enumerate(iter_batches(data)):
        if i == nth:
            return position, header.base_offset, header.last_offset
        position += len(view)
    raise AssertionError(f"segment {segment_index} has no batch {nth}")


def unreadable_from(log: PartitionLog) -> int | None:
    return log.unreadable_from


def destroy(path: Path, position: int, garbage: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, garbage, position)
    finally:
        os.close(fd)


def load(directory: Path, *, clean: bool) -> PartitionLog:
    return PartitionLog.load(
        TP.topic,
        TP.partition,
        directory,
        SMALL_SEGMENTS,
        clock=lambda: TIMESTAMP_MS,
        clean=clean,
        recovery_point=0,
        log_start_offset=0,
    )


def segment_files(directory: Path) -> bytes:
    """Every `.log` file, in offset order: what the replica holds on disk."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


async def follow_until_repaired(leader: MemoryLog, log: PartitionLog) -> None:
    fetcher = ReplicaFetcher(1, FakeLeader({TP: leader}, {TP: EPOCH}), FAST)
    async with trio.open_nursery() as nursery:
        await nursery.start(fetcher.run)
        fetcher.add_partition(TP, PartitionFollowerLog(log), leader_epoch=EPOCH)
        await wait_until(
            lambda: log.unreadable_from is None and log.log_end_offset == leader.log_end_offset,
            WAIT_S,
        )
        nursery.cancel_scope.cancel()


async def test_a_read_remembers_where_the_loss_starts_not_the_offset_it_asked_for(
    tmp_path: Path,
) -> None:
    leader = leader_history()
    log = await partition_log_copy(tmp_path / "orders-0", leader)
    assert len(log.segments) > 2
    position, first_bad, last_bad = batch_at(log, 2, 1)
    assert last_bad > first_bad > log.segments[2].base_offset
    # A batch's header goes: a consumer asks for its last offset.
    destroy(log.segments[2].log_path, position, bytes(61))
    assert (await log.read(0, 1 << 20)).records, "a read below it meets nothing"
    assert log.unreadable_from is None
    with pytest.raises(KafkaError) as raised:
        await log.read(last_bad, 1 << 20)
    assert raised.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert unreadable_from(log) == first_bad
    # A single host answers it as before (docs/corrupt-data.md).
    assert NO_REPLICATION.corrupt_read(TP.topic, TP.partition) == ErrorCode.CORRUPT_MESSAGE
    log.close(clean=True)


async def test_a_replicated_log_refuses_a_batch_whose_body_fails_its_crc_and_serves_those_before(
    tmp_path: Path,
) -> None:
    leader = leader_history()
    directory = tmp_path / "orders-0"
    log = await partition_log_copy(directory, leader)  # replicated: a high watermark is set
    position, first_bad, last_bad = batch_at(log, 1, 1)
    segment_base = log.segments[1].base_offset
    # The last byte of the batch's records changes; its header stays intact.
    data = log.segments[1].log_path.read_bytes()
    end = position + len(next(iter_batches(data[position:]))[1])
    destroy(log.segments[1].log_path, end - 1, bytes([data[end - 1] ^ 0xFF]))
    before = await log.read(segment_base, 1 << 20)
    assert [h.last_offset for h, _ in iter_batches(bytes(before.records))] == [first_bad - 1]
    assert log.unreadable_from is None
    with pytest.raises(KafkaError) as raised:
        await log.read(last_bad, 1 << 20)
    assert raised.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert "CRC" in raised.value.message
    assert unreadable_from(log) == first_bad
    log.close(clean=True)
    # Without replication the broker sends log bytes unread, as Kafka's does.
    alone = await trio.to_thread.run_sync(lambda: load(directory, clean=True))
    assert (await alone.read(last_bad, 1 << 20)).records
    alone.close(clean=True)


@pytest.mark.parametrize("found", ["by a read", "at recovery", "in the active segment"])
async def test_a_follower_cut_below_its_corrupt_batch_ends_byte_for_byte_equal_to_the_leader(
    tmp_path: Path, found: str
) -> None:
    leader = leader_history()
    directory = tmp_path / "orders-0"
    log = await partition_log_copy(directory, leader)
    expected = segment_files(directory)
    assert expected == b"".join(b.data for b in leader.batches)
    segment_index = len(log.segments) - 1 if found == "in the active segment" else 1
    position, first_bad, _ = batch_at(log, segment_index, 1)
    destroy(log.segments[segment_index].log_path, position + 20, b"\xff" * 40)
    if found == "by a read":
        with pytest.raises(KafkaError):
            await log.read(first_bad, 1 << 20)
    else:
        log.close(clean=found == "in the active segment")
        log = await trio.to_thread.run_sync(
            lambda: load(directory, clean=found == "in the active segment")
        )
    assert log.unreadable_from == first_bad
    assert PartitionFollowerLog(log).log_end_offset == first_bad

    await follow_until_repaired(leader, log)
    assert segment_files(directory) == expected
    assert log.epoch_cache.entries == leader.epoch_cache.entries
    log.close(clean=False)
    # Reloaded after a crash, the repaired log is the same, with nothing left to repair.
    reloaded = await trio.to_thread.run_sync(lambda: load(directory, clean=False))
    try:
        assert reloaded.unreadable_from is None
        assert segment_files(directory) == expected
    finally:
        reloaded.close(clean=True)


async def test_a_follower_cut_at_a_destroyed_header_keeps_every_batch_before_it(
    tmp_path: Path,
) -> None:
    leader = leader_history()
    log = await partition_log_copy(tmp_path / "orders-0", leader)
    position, first_bad, _ = batch_at(log, 1, 1)
    destroy(log.segments[1].log_path, position, bytes(61))
    with pytest.raises(KafkaError):
        await log.read(first_bad, 1 << 20)
    await PartitionFollowerLog(log).truncate_to(first_bad)
    assert log.log_end_offset == first_bad
    assert log.unreadable_from is None
    assert len(log.segments) == 2
    assert segment_files(tmp_path / "orders-0") == b"".join(
        b.data for b in leader.batches if b.base_offset < first_bad
    )
    log.close(clean=True)


def test_the_leader_hands_its_partition_to_the_first_live_in_sync_replica() -> None:
    current = LeaderAndIsr(leader=2, leader_epoch=4, isr=(2, 3, 1), zk_version=7)
    handed = corrupt_leader_hand_off(2, (2, 3, 1), current, live={1, 2, 3})
    assert handed == LeaderAndIsr(leader=3, leader_epoch=5, isr=(3, 1), zk_version=7)
    # Broker 3 is gone: the next in replica order.
    assert corrupt_leader_hand_off(2, (2, 3, 1), current, live={1, 2}) == LeaderAndIsr(
        1, 5, (3, 1), 7
    )
    # Nobody else in sync and alive, or not the leader: nothing to write.
    assert corrupt_leader_hand_off(2, (2, 3, 1), current, live={2}) is None
    alone = LeaderAndIsr(leader=2, leader_epoch=4, isr=(2,), zk_version=7)
    assert corrupt_leader_hand_off(2, (2, 3, 1), alone, live={1, 2, 3}) is None
    assert corrupt_leader_hand_off(3, (2, 3, 1), current, live={1, 2, 3}) is None


@given(
    replicas=st.permutations([1, 2, 3, 4]).map(tuple),
    isr=st.sets(st.integers(1, 4), min_size=1).map(lambda s: tuple(sorted(s))),
    live=st.sets(st.integers(1, 4)),
    node_id=st.integers(1, 4),
)
def test_a_hand_off_only_ever_names_a_live_in_sync_replica_and_leaves_the_isr(
    replicas: tuple[int, ...], isr: tuple[int, ...], live: set[int], node_id: int
) -> None:
    leader = isr[0]
    current = LeaderAndIsr(leader, 9, isr, zk_version=3)
    handed = corrupt_leader_hand_off(node_id, replicas, current, live)
    others = [b for b in replicas if b in isr and b in live and b != node_id]
    if node_id != leader or not others:
        assert handed is None
        return
    assert handed is not None
    assert handed.leader == others[0]
    assert handed.leader_epoch == 10 and handed.zk_version == 3
    assert node_id not in handed.isr and set(handed.isr) == set(isr) - {node_id}
