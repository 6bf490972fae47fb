"""Idempotent producers: duplicates, ordering, fencing, and state across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.errors import KafkaError
from broker.log.partition_log import PartitionLog
from broker.log.producer_state import INT32_MAX, ProducerStateManager, last_sequence
from broker.protocol.error_codes import ErrorCode
from tests.log.helpers import config, crash, make_batch, open_manager, read_all

PID = 4000


async def _send(log: PartitionLog, seq: int, n: int = 2, epoch: int = 0, pid: int = PID):  # type: ignore[no-untyped-def]
    data, header = make_batch(
        [b"s%d" % (seq + i) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    return await log.append(data, header)


async def _expect(code: ErrorCode, log: PartitionLog, seq: int, epoch: int = 0) -> None:
    end = log.log_end_offset
    with pytest.raises(KafkaError) as error:
        await _send(log, seq, epoch=epoch)
    assert error.value.error_code == code
    assert log.log_end_offset == end


async def test_a_retried_batch_returns_the_original_offsets_and_appends_nothing(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        results = [await _send(log, seq) for seq in range(0, 12, 2)]
        end = log.log_end_offset
        # Each of the last five is recognised; the sixth-last is no longer cached.
        for original, seq in zip(results[1:], range(2, 12, 2), strict=True):
            again = await _send(log, seq)
            assert again.duplicate
            assert (again.base_offset, again.last_offset) == (
                original.base_offset,
                original.last_offset,
            )
        assert log.log_end_offset == end
        await _expect(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, 0)
        assert len(await read_all(log)) == 12


async def test_sequence_gaps_are_out_of_order(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await _send(log, 0)
        await _expect(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, 3)
        await _expect(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, 1)
        assert not (await _send(log, 2)).duplicate


async def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await _send(log, 0, epoch=3)
        await _expect(ErrorCode.INVALID_PRODUCER_EPOCH, log, 2, epoch=2)
        await _expect(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, 2, epoch=4)
        assert not (await _send(log, 0, epoch=4)).duplicate
        await _expect(ErrorCode.INVALID_PRODUCER_EPOCH, log, 2, epoch=3)


async def test_an_unknown_producer_may_start_at_any_sequence(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        assert (await _send(log, 77)).base_offset == 0
        assert (await _send(log, 79)).base_offset == 2


def test_sequences_wrap_at_int32_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    state = ProducerStateManager()
    _, header = make_batch(
        [b"a", b"b"], producer_id=1, producer_epoch=0, base_sequence=INT32_MAX - 1
    )
    state.record(header, 0)
    _, wrapped = make_batch([b"c"], producer_id=1, producer_epoch=0, base_sequence=0)
    assert state.check(wrapped) is None
    _, skipped = make_batch([b"c"], producer_id=1, producer_epoch=0, base_sequence=1)
    with pytest.raises(KafkaError):
        state.check(skipped)


def test_a_corrupt_snapshot_is_refused() -> None:
    state = ProducerStateManager()
    _, header = make_batch([b"a"], producer_id=1, producer_epoch=0, base_sequence=0)
    state.record(header, 5)
    data = state.to_bytes()
    assert ProducerStateManager.from_bytes(data).producers[1].batches == state.producers[1].batches
    with pytest.raises(ValueError):
        ProducerStateManager.from_bytes(data[:-1] + b"}")


@pytest.mark.parametrize("clean", [True, False])
async def test_producer_state_survives_a_restart(tmp_path: Path, clean: bool) -> None:
    cfg = config(tmp_path, log_segment_bytes="400")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        results = [await _send(log, seq, epoch=1) for seq in range(0, 20, 2)]
        await _send(log, 0, pid=PID + 1, epoch=5)
        assert len(log.segments) > 2
        if not clean:
            crash(manager)
    async with open_manager(cfg) as manager:
        reopened = manager.partition("t", 0)
        assert reopened is not None
        log = reopened
        end = log.log_end_offset
        for original, seq in zip(results[-5:], range(10, 20, 2), strict=True):
            again = await _send(log, seq, epoch=1)
            assert again.duplicate and again.base_offset == original.base_offset
        assert log.log_end_offset == end
        await _expect(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, 22, epoch=1)
        await _expect(ErrorCode.INVALID_PRODUCER_EPOCH, log, 20, epoch=0)
        assert (await _send(log, 20, epoch=1)).base_offset == end
        assert (await _send(log, 2, pid=PID + 1, epoch=5)).base_offset == end + 2


async def test_producer_state_is_rebuilt_from_the_log_without_snapshots(tmp_path: Path) -> None:
    cfg = config(tmp_path, log_segment_bytes="400")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for seq in range(0, 20, 2):
            await _send(log, seq)
        directory = log.directory
        crash(manager)
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    async with open_manager(cfg) as manager:
        reopened = manager.partition("t", 0)
        assert reopened is not None
        log = reopened
        assert (await _send(log, 18)).duplicate
        await _expect(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, 24)
