"""PartitionLog as a follower replica: the leader's batches appended as they are,
truncation (KIP-101) and full truncation, crash-safe; the high watermark and the
leader-epoch checkpoint kept with the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.errors import KafkaError
from broker.log.log_manager import REPLICATION_OFFSET_FILE, LogManager
from broker.log.log_truncation import truncation_steps
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.control import control_batch
from broker.protocol.record_batch.layout import parse_header
from broker.protocol.record_batch.validator import assign_offsets
from broker.protocol.records import Record, encode_batch
from broker.replication.leader_epoch_cache import EpochEntry
from broker.replication.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    read_checkpoint,
)
from tests.log.helpers import (
    BASE_TS,
    append_values,
    config,
    crash,
    open_manager,
    read_all,
    stored_bytes,
)

TOPIC = "replica"


def reopened(manager: LogManager) -> PartitionLog:
    log = manager.partition(TOPIC, 0)
    assert log is not None
    return log


class LeaderHistory:
    """Batches as a leader wrote them: consecutive offsets, each stamped with its epoch."""

    def __init__(self, start: int = 0) -> None:
        self.next_offset = start

    def batch(self, epoch: int, *values: bytes, pid: int = -1, txn: bool = False) -> bytes:
        records = [Record(i, i, None, v) for i, v in enumerate(values)]
        data = encode_batch(
            records,
            base_offset=self.next_offset,
            partition_leader_epoch=epoch,
            base_timestamp=BASE_TS + self.next_offset,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=self.next_offset if pid >= 0 else -1,
            is_transactional=txn,
        )
        self.next_offset += len(values)
        return data

    def marker(self, epoch: int, pid: int, *, commit: bool) -> bytes:
        data = bytearray(control_batch(pid, 0, commit, 0))
        assign_offsets(data, parse_header(data), self.next_offset, epoch, None)
        self.next_offset += 1
        return bytes(data)


async def test_batches_keep_the_leaders_offsets_epochs_and_bytes(tmp_path: Path) -> None:
    leader = LeaderHistory()
    batches = [leader.batch(0, b"a", b"b"), leader.batch(0, b"c"), leader.batch(2, b"d")]
    leader.next_offset += 5  # a compacted leader log: a gap between batches
    batches.append(leader.batch(4, b"e"))
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await log.append_as_follower(b"".join(batches[:2]))
        await log.append_as_follower(b"".join(batches[2:]))
        assert await stored_bytes(log) == b"".join(batches)
        assert log.log_end_offset == 10
        expected = (EpochEntry(0, 0), EpochEntry(2, 3), EpochEntry(4, 9))
        assert log.epoch_cache.entries == expected
        assert tuple(read_checkpoint(log.epoch_checkpoint_path)) == expected
    async with open_manager(config(tmp_path)) as manager:
        log = reopened(manager)
        assert log.epoch_cache.entries == expected


async def test_an_overlapping_or_corrupt_fetch_appends_nothing(tmp_path: Path) -> None:
    leader = LeaderHistory()
    first, second = leader.batch(0, b"a", b"b"), leader.batch(0, b"c")
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await log.append_as_follower(first)
        for bad in (first, second + first, second[:-1] + bytes([second[-1] ^ 0xFF])):
            with pytest.raises(KafkaError) as caught:
                await log.append_as_follower(bad)
            assert caught.value.error_code == ErrorCode.CORRUPT_MESSAGE
            assert log.log_end_offset == 2
        await log.append_as_follower(second)
        assert [v for _, v in await read_all(log)] == [b"a", b"b", b"c"]


async def test_transactions_replicated_as_the_leader_wrote_them(tmp_path: Path) -> None:
    leader = LeaderHistory()
    aborted = [leader.batch(0, b"t1", pid=7, txn=True), leader.marker(0, 7, commit=False)]
    open_txn = leader.batch(0, b"t2", pid=8, txn=True)
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await log.append_as_follower(b"".join([*aborted, open_txn]))
        assert log.open_transactions() == {8: 2}
        assert log.last_stable_offset == 2
        txns = log.collect_aborted_transactions(0, 3)
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in txns] == [(7, 0, 1)]
        # The open transaction is cut away: the producer state no longer has it.
        await log.truncate_to(2)
        assert log.open_transactions() == {}
        assert log.last_stable_offset == 2
        await log.truncate_to(1)
        assert log.collect_aborted_transactions(0, 3) == ()
        assert log.open_transactions() == {7: 0}


async def _diverged(log: PartitionLog) -> list[bytes]:
    """Eight batches over several segments: epoch 0 (offsets 0-5), epoch 1 (6-11)."""
    leader = LeaderHistory()
    batches = [leader.batch(0 if i < 3 else 1, b"v%d" % i, b"w%d" % i) for i in range(6)]
    for data in batches:
        await log.append_as_follower(data)
    return batches


async def test_truncation_cuts_segments_indexes_epochs_and_high_watermark(tmp_path: Path) -> None:
    cfg = config(tmp_path, log_segment_bytes="200", log_index_interval_bytes="1")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        batches = await _diverged(log)
        assert len(log.segments) >= 3
        log.update_high_watermark(9)
        await log.truncate_to(5)  # in the middle of the batch 4-5: it goes whole
        assert log.log_end_offset == 4
        assert log.high_watermark == 4
        assert log.epoch_cache.entries == (EpochEntry(0, 0),)  # epoch 1 started at 6
        assert read_checkpoint(log.epoch_checkpoint_path) == [EpochEntry(0, 0)]
        assert await stored_bytes(log) == b"".join(batches[:2])
        assert log.offset_for_timestamp(BASE_TS + 2) == (2, BASE_TS + 2)
        assert log.offset_for_timestamp(BASE_TS + 4) is None
        for segment in log.segments:
            assert all(offset < 4 for offset, _ in segment.offset_index.entries())
        leader = LeaderHistory(4)
        await log.append_as_follower(leader.batch(3, b"new"))
        assert [v for _, v in await read_all(log)][-1] == b"new"
        assert log.epoch_cache.entries[-1] == EpochEntry(3, 4)
        await manager.checkpoint()
        assert (log.directory.parent / REPLICATION_OFFSET_FILE).exists()
    async with open_manager(cfg) as manager:
        log = reopened(manager)
        assert log.log_end_offset == 5 and log.high_watermark == 4
        assert [v for _, v in await read_all(log)] == [b"v0", b"w0", b"v1", b"w1", b"new"]
        assert log.epoch_cache.entries[-1] == EpochEntry(3, 4)


@pytest.mark.parametrize("crash_after", range(5))
async def test_a_crash_after_any_truncation_step_recovers_to_a_consistent_prefix(
    tmp_path: Path, crash_after: int
) -> None:
    cfg = config(tmp_path, log_segment_bytes="200", log_index_interval_bytes="1")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        batches = await _diverged(log)
        await manager.checkpoint()
        assert [s.base_offset for s in log.segments] == [0, 4, 8]
        steps = truncation_steps(log.directory, log.segments[0], log.segments[1:], 2)
        assert len(steps) == 4  # snapshots, segment 8, segment 4, segment 0 cut
        for step in steps[:crash_after]:
            step()
        crash(manager)
    async with open_manager(cfg) as manager:
        log = reopened(manager)
        # What is left is the old log up to some batch, no shorter than the cut.
        recovered = await stored_bytes(log)
        assert b"".join(batches).startswith(recovered)
        assert log.log_end_offset >= 2
        await log.truncate_to(2)
        assert await stored_bytes(log) == batches[0]
        assert log.epoch_cache.entries == (EpochEntry(0, 0),)
        await log.append_as_follower(LeaderHistory(2).batch(2, b"after"))
    async with open_manager(cfg) as manager:
        log = reopened(manager)
        assert [v for _, v in await read_all(log)][-1] == b"after"


async def test_truncating_fully_starts_an_empty_log_at_the_offset(tmp_path: Path) -> None:
    cfg = config(tmp_path, log_segment_bytes="200")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await _diverged(log)
        log.update_high_watermark(6)
        await log.truncate_fully_and_start_at(40)
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (40, 40, 40)
        assert log.epoch_cache.entries == ()
        assert len(log.segments) == 1 and log.segments[0].base_offset == 40
        await log.append_as_follower(LeaderHistory(40).batch(5, b"x"))
    async with open_manager(cfg) as manager:
        log = reopened(manager)
        assert (log.log_start_offset, log.log_end_offset) == (40, 41)
        assert log.epoch_cache.entries == (EpochEntry(5, 40),)
        assert sorted(p.name for p in log.directory.glob("*.log")) == [f"{40:020d}.log"]


async def test_a_crash_during_full_truncation_leaves_a_prefix_or_the_new_log(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path, log_segment_bytes="200")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        batches = await _diverged(log)
        await manager.checkpoint()
        newest = log.segments[-1]
        crash(manager)
    # Only the newest segment's files were gone when the process died.
    for path in sorted(newest.directory.glob(f"{newest.base_offset:020d}.*"), reverse=True):
        path.unlink()
    async with open_manager(cfg) as manager:
        log = reopened(manager)
        assert b"".join(batches).startswith(await stored_bytes(log))
        await log.truncate_fully_and_start_at(40)
        assert log.log_end_offset == 40


async def test_the_high_watermark_is_the_log_end_until_replication_sets_it(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await append_values(log, [b"a", b"b", b"c"])
        assert log.high_watermark == 3 and log.replicated_high_watermark is None
        assert (await log.read(0, 1 << 20)).high_watermark == 3
        await manager.checkpoint()
        assert not (log.directory.parent / REPLICATION_OFFSET_FILE).exists()
        log.update_high_watermark(10)  # never past the log end
        assert log.high_watermark == 3
        log.update_high_watermark(1)
        assert (await log.read(0, 1 << 20)).high_watermark == 1
        assert log.last_stable_offset == 1


async def test_leader_appends_start_their_epoch_in_the_checkpoint(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await append_values(log, [b"a", b"b"])
        log.leader_epoch = 3
        await append_values(log, [b"c"])
        await log.append_control(5, 0, commit=True)
        expected = [EpochEntry(0, 0), EpochEntry(3, 2)]
        assert log.epoch_cache.entries == tuple(expected)
        assert not log.epoch_checkpoint_path.exists()  # no fsync on the append path
        await log.flush()
        assert read_checkpoint(log.directory / LEADER_EPOCH_CHECKPOINT_FILENAME) == expected
        # Becoming leader starts the epoch at the log end before anything is appended.
        await log.become_leader(5)
        assert log.leader_epoch == 5
        assert read_checkpoint(log.epoch_checkpoint_path) == [*expected, EpochEntry(5, 4)]
        log.leader_epoch = 6  # epoch 5 wrote nothing: epoch 6 replaces it at offset 4
        await append_values(log, [b"d"])
    async with open_manager(config(tmp_path)) as manager:  # written at the clean close
        assert reopened(manager).epoch_cache.entries == (
            *expected,
            EpochEntry(6, 4),
        )


async def test_a_follower_becoming_leader_keeps_its_high_watermark(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await append_values(log, [b"a", b"b", b"c"])
        log.update_high_watermark(1)  # the old leader's, as a follower learned it
        await log.become_leader(4)
        # Records 1 and 2 may be missing on another in-sync replica: not readable yet.
        assert log.high_watermark == 1
        assert (await log.read(0, 1 << 20)).high_watermark == 1


async def test_an_unreadable_epoch_checkpoint_starts_an_empty_cache(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic(TOPIC, 1)).partitions[0]
        await append_values(log, [b"a"])
        path = log.epoch_checkpoint_path
    path.write_bytes(b"garbage")
    async with open_manager(config(tmp_path)) as manager:
        log = reopened(manager)
        assert not log.epoch_cache.entries
        await append_values(log, [b"b"])
        assert log.epoch_cache.entries == (EpochEntry(0, 1),)
