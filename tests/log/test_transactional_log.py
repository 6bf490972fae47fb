"""The log's side of transactions: markers, the last stable offset, `.txnindex`,
read_committed reads, fencing by marker epoch, recovery of all of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from broker.log.partition_log import PartitionLog
from broker.log.transaction_index import AbortedTxn
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.control import CONTROL_ABORT, CONTROL_COMMIT, control_type
from broker.protocol.records import Record, encode_batch, iter_batches, read_batch_header
from tests.log.helpers import append_values, config, crash, decode_values, open_manager

_NO_TIME_ROLL = {"log_roll_ms": str(10**15)}


async def append_txn(
    log: PartitionLog, pid: int, values: list[bytes], *, epoch: int = 0, seq: int = 0
) -> tuple[int, int]:
    data = encode_batch(
        [Record(i, i, None, v) for i, v in enumerate(values)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    result = await log.append(data, read_batch_header(data))
    return result.base_offset, result.last_offset


def reopened(manager: LogManager, topic: str, partition: int) -> PartitionLog:
    """A partition after a restart; the same name as before keeps its type."""
    log = manager.partition(topic, partition)
    assert log is not None
    return log


async def committed_values(log: PartitionLog, offset: int = 0) -> list[bytes | None]:
    """What a read_committed consumer keeps: records below the LSO, minus aborted
    transactions and control records (the client-side filtering Kafka specifies),
    fetching one read after another as a consumer does."""
    out: list[bytes | None] = []
    skipping: set[int] = set()
    while offset < log.last_stable_offset:
        result = await log.read(offset, 1 << 20, read_committed=True)
        aborted = sorted((a.first_offset, a.producer_id) for a in result.aborted_transactions or ())
        batches = list(iter_batches(result.records))
        assert batches, f"no progress at {offset}"
        for header, view in batches:
            for first, pid in list(aborted):
                if pid == header.producer_id and first <= header.base_offset:
                    skipping.add(pid)
                    aborted.remove((first, pid))
            offset = header.last_offset + 1
            if header.is_control:
                skipping.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in skipping:
                continue
            out.extend(v for _, v in decode_values(view))
    return out


async def test_an_open_transaction_holds_the_last_stable_offset_until_its_marker(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_values(log, [b"plain"])
        assert await append_txn(log, 7, [b"t1", b"t2"]) == (1, 2)
        await append_values(log, [b"after"])
        assert log.last_stable_offset == 1
        assert await committed_values(log) == [b"plain"]
        marker = await log.append_control(7, 0, commit=True)
        assert marker == 4
        assert log.last_stable_offset == log.log_end_offset == 5
        assert await committed_values(log) == [b"plain", b"t1", b"t2", b"after"]


async def test_a_read_committed_read_stops_before_the_first_open_transaction(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_txn(log, 1, [b"open"])
        await append_values(log, [b"later"])
        result = await log.read(0, 1 << 20, read_committed=True)
        assert bytes(result.records) == b""
        assert result.last_stable_offset == 0
        uncommitted = await log.read(0, 1 << 20)
        assert [v for _, v in decode_values(uncommitted.records)] == [b"open", b"later"]
        assert uncommitted.aborted_transactions is None


async def test_an_abort_marker_is_indexed_and_returned_to_read_committed_reads(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_txn(log, 3, [b"x", b"y"])
        await append_txn(log, 4, [b"keep"])
        await log.append_control(3, 0, commit=False)
        await log.append_control(4, 0, commit=True)
        result = await log.read(0, 1 << 20, read_committed=True)
        assert result.aborted_transactions == (AbortedTxn(3, 0, 3, 2),)
        assert await committed_values(log) == [b"keep"]
        assert log.active.txn_index.path.stat().st_size == 34
        kinds = [
            control_type(view, header)
            for header, view in iter_batches(result.records)
            if header.is_control
        ]
        assert kinds == [CONTROL_ABORT, CONTROL_COMMIT]
        # A read starting after the aborted transaction does not mention it.
        later = await log.read(5, 1 << 20, read_committed=True)
        assert later.aborted_transactions == ()


async def test_a_marker_with_a_newer_epoch_fences_the_old_producer(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_txn(log, 9, [b"a"], epoch=2)
        await log.append_control(9, 3, commit=False)
        with pytest.raises(KafkaError) as caught:
            await append_txn(log, 9, [b"zombie"], epoch=2, seq=1)
        assert caught.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        with pytest.raises(KafkaError):
            await log.append_control(9, 2, commit=True)
        assert await append_txn(log, 9, [b"next"], epoch=4, seq=0) == (2, 2)


async def test_a_transactional_producer_keeps_its_sequence_across_transactions(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_txn(log, 5, [b"a", b"b"], seq=0)
        await log.append_control(5, 0, commit=True)
        assert await append_txn(log, 5, [b"c"], seq=2) == (3, 3)
        await log.append_control(5, 0, commit=True)
        assert await committed_values(log) == [b"a", b"b", b"c"]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
async def test_open_and_aborted_transactions_survive_a_restart(tmp_path: Path, clean: bool) -> None:
    cfg = config(tmp_path, log_segment_bytes="400", **_NO_TIME_ROLL)
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for i in range(6):
            await append_txn(log, 100 + i, [b"v%d" % i] * 3)
            await log.append_control(100 + i, 0, commit=i % 2 == 0)
        await append_txn(log, 200, [b"open"])
        expected = await committed_values(log)
        lso = log.last_stable_offset
        segments = len(log.segments)
        aborted = (await log.read(0, 1 << 20, read_committed=True)).aborted_transactions
        if not clean:
            crash(manager)
    assert segments > 2 and expected == [b"v0"] * 3 + [b"v2"] * 3 + [b"v4"] * 3
    if not clean:
        (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    async with open_manager(cfg) as manager:
        log = reopened(manager, "t", 0)
        assert log.last_stable_offset == lso
        assert (await log.read(0, 1 << 20, read_committed=True)).aborted_transactions == aborted
        assert await committed_values(log) == expected
        await log.append_control(200, 0, commit=False)
        assert log.last_stable_offset == log.log_end_offset


async def test_lost_txnindex_files_are_rebuilt_by_recovery(tmp_path: Path) -> None:
    cfg = config(tmp_path, **_NO_TIME_ROLL)
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_txn(log, 1, [b"gone"])
        await log.append_control(1, 0, commit=False)
        directory = log.directory
        crash(manager)
    for path in directory.glob("*.txnindex"):
        path.unlink()
    for path in directory.glob("*.snapshot"):
        path.unlink()
    async with open_manager(cfg) as manager:
        log = reopened(manager, "t", 0)
        result = await log.read(0, 1 << 20, read_committed=True)
        assert result.aborted_transactions == (AbortedTxn(1, 0, 1, 2),)
        assert await committed_values(log) == []


async def test_deleting_old_segments_drops_their_txnindex_with_them(tmp_path: Path) -> None:
    cfg = config(tmp_path, log_segment_bytes="300", **_NO_TIME_ROLL)
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for i in range(8):
            await append_txn(log, 50 + i, [b"x" * 40])
            await log.append_control(50 + i, 0, commit=False)
        before = set(log.directory.glob("*.txnindex"))
        await log.delete_records_before(log.segments[-1].base_offset)
        after = set(log.directory.glob("*.txnindex"))
        assert len(after) < len(before) and after <= before
        result = await log.read(log.log_start_offset, 1 << 20, read_committed=True)
        assert all(a.last_offset >= log.log_start_offset for a in result.aborted_transactions or ())
        assert log.last_stable_offset == log.log_end_offset


OPS = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["write", "write", "commit", "abort", "plain"])),
    max_size=40,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, crash_at_end=st.booleans())
async def test_read_committed_sees_exactly_the_committed_records_before_the_lso(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[int, str]], crash_at_end: bool
) -> None:
    """Any interleaving of three transactional producers and plain appends, over small
    segments and a restart: a read_committed consumer gets the plain records and those
    of committed transactions, in log order, up to the first open transaction."""
    tmp_path = tmp_path_factory.mktemp("txn-prop")
    cfg = config(tmp_path, log_segment_bytes="500", **_NO_TIME_ROLL)
    records: list[tuple[int, bytes, int | None]] = []  # offset, value, producer (None: plain)
    outcome: dict[tuple[int, int], bool] = {}  # (producer, txn number) -> committed
    txn_number = [0, 0, 0]
    open_first: dict[int, int] = {}
    seqs = [0, 0, 0]
    txn_of: dict[int, tuple[int, int]] = {}
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for n, (producer, op) in enumerate(ops):
            pid = 10 + producer
            if op == "write":
                value = b"p%d-%d" % (producer, n)
                offset, _ = await append_txn(log, pid, [value], seq=seqs[producer])
                seqs[producer] += 1
                open_first.setdefault(producer, offset)
                records.append((offset, value, producer))
                txn_of[offset] = (producer, txn_number[producer])
            elif op == "plain":
                value = b"plain-%d" % n
                offset, _ = await append_values(log, [value])
                records.append((offset, value, None))
            elif producer in open_first:
                await log.append_control(pid, 0, commit=op == "commit")
                outcome[(producer, txn_number[producer])] = op == "commit"
                txn_number[producer] += 1
                del open_first[producer]
        lso = min(open_first.values(), default=log.log_end_offset)
        assert log.last_stable_offset == lso
        if crash_at_end:
            crash(manager)
    expected = [
        value
        for offset, value, producer in records
        if offset < lso and (producer is None or outcome.get(txn_of[offset], False))
    ]
    if crash_at_end:
        (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    async with open_manager(cfg) as manager:
        log = reopened(manager, "t", 0)
        assert log.last_stable_offset == lso
        assert await committed_values(log) == expected
