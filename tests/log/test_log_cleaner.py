"""Log compaction (broker/log/log_cleaner.py and its pass): what survives a pass, that
offsets and producer fields are kept, tombstones and transaction markers until their
delete horizon, aborted records removed, crash safety of the swap, corrupt segments."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.cleaner_pass import FaultHook
from broker.log.log_cleaner import CleanerSettings, LogCleaner
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.protocol.compression import CompressionType
from broker.protocol.record_batch.record_sinks import record_keys
from broker.protocol.records import (
    InvalidRecordsError,
    Record,
    decode_records,
    encode_batch,
    iter_batches,
    iter_records,
    read_batch_header,
)
from tests.log.helpers import FakeClock, config, crash, open_manager

DAY_MS = 86_400_000
KEYS = [f"k{i}".encode() for i in range(8)]
Op = tuple[int, bytes | None]  # (key index, value or tombstone)


class InjectedCrash(BaseException):
    """A kill -9 between two steps: nothing after it runs, not even error handling."""


def cleaner_for(
    manager: LogManager, fault: FaultHook | None = None, *, worker: str = "thread"
) -> LogCleaner:
    """Passes in a thread (a process costs a Python start per pass), except where the
    worker process itself is under test."""
    settings_ = CleanerSettings(
        threads=1,
        io_max_bytes_per_second=float("inf"),
        backoff_ms=10,
        dedupe_buffer_size=1 << 20,
        worker=worker,
    )

    def logs() -> list[PartitionLog]:
        return [p for t in manager.topics().values() for p in t.partitions]

    return LogCleaner(settings_, lambda: iter(logs()), clock=manager.clock, fault=fault)


@asynccontextmanager
async def compacted_log(
    tmp_path: Path, clock: FakeClock, **topic_configs: str
) -> AsyncIterator[tuple[LogManager, PartitionLog]]:
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "600",
        "min.cleanable.dirty.ratio": "0",
    }
    configs.update({k.replace("_", "."): v for k, v in topic_configs.items()})
    async with open_manager(config(tmp_path, log_roll_ms=str(10**15)), clock) as manager:
        log = (await manager.create_topic("c", 1, configs=configs)).partitions[0]
        yield manager, log


async def append_ops(
    log: PartitionLog,
    ops: Sequence[Op],
    clock: FakeClock,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    compression: CompressionType = CompressionType.NONE,
) -> None:
    records = [Record(i, i, KEYS[key], value) for i, (key, value) in enumerate(ops)]
    data = encode_batch(
        records,
        compression=compression,
        base_timestamp=clock.now,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
    )
    await log.append(data, read_batch_header(data))


async def read_all(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the log start, fetch after fetch."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = await log.read(offset, 1 << 16)
        batches = list(iter_batches(result.records))
        assert batches, f"no progress at {offset}"
        for header, view in batches:
            if header.is_control:
                offset = header.last_offset + 1
                continue
            out.extend((r.offset, r.key, r.value) for r in iter_records(view, header))
            offset = header.last_offset + 1
    return out


async def clean_once(cleaner: LogCleaner, log: PartitionLog) -> None:
    await cleaner.clean(log, cleaner.describe(log))


ops_strategy = st.lists(
    st.lists(
        st.tuples(
            st.integers(0, len(KEYS) - 1), st.one_of(st.none(), st.binary(min_size=1, max_size=20))
        ),
        min_size=1,
        max_size=6,
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=ops_strategy,
    codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD]),
)
def test_a_pass_keeps_exactly_the_latest_record_of_each_key_at_its_offset(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[Op]], codec: CompressionType
) -> None:
    tmp_path = tmp_path_factory.mktemp("clean")
    clock = FakeClock()

    async def scenario() -> None:
        async with compacted_log(tmp_path, clock) as (manager, log):
            for ops in batches:
                await append_ops(log, ops, clock, compression=codec)
            before = await read_all(log)
            original = {offset: (key, value) for offset, key, value in before}
            latest = {key: (offset, value) for offset, key, value in before}
            await clean_once(cleaner_for(manager), log)
            after = await read_all(log)
            offsets = [offset for offset, _, _ in after]
            assert offsets == sorted(set(offsets)), "offsets ascend, each once"
            for offset, key, value in after:
                assert original[offset] == (key, value), "records keep their offsets"
            # Every key's last record, tombstones included (delete.retention.ms not over).
            assert {key: (o, v) for o, key, v in after} == latest
            # Below the cleaned range's end, a key appears at most once.
            cleaned_end = log.active.base_offset
            cleaned_keys = [key for o, key, _ in after if o < cleaned_end]
            assert len(cleaned_keys) == len(set(cleaned_keys))
            # The active segment is never touched.
            assert [r for r in after if r[0] >= cleaned_end] == [
                r for r in before if r[0] >= cleaned_end
            ]
            result = await log.read(log.log_start_offset, 1 << 20)
            assert all(
                h.compression == codec for h, _ in iter_batches(result.records) if h.record_count
            )
            # And a restart reads the same.
            crash(manager)
            await manager.open()
            reloaded = manager.partition("c", 0)
            assert reloaded is not None
            assert await read_all(reloaded) == after

    trio.run(scenario)


async def test_a_pass_in_a_worker_process_gives_what_a_pass_in_a_thread_gives(
    tmp_path: Path,
) -> None:
    results = []
    for worker in ("process", "thread"):
        clock = FakeClock()
        async with compacted_log(tmp_path / worker, clock) as (manager, log):
            pid = await manager.allocate_producer_id()
            for i in range(40):
                await append_ops(
                    log, [(i % 4, b"v%d" % i), (5, None if i % 2 else b"x")], clock,
                    producer_id=pid, producer_epoch=0, base_sequence=2 * i,
                )  # fmt: skip
            await clean_once(cleaner_for(manager, worker=worker), log)
            results.append(await read_all(log))
            assert len(results[-1]) < 80
    assert results[0] == results[1]


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=30)),
            st.one_of(st.none(), st.binary(max_size=300)),
            st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=2),
        ),
        min_size=1,
        max_size=20,
    ),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.LZ4]),
    flip=st.none() | st.tuples(st.integers(0, 10_000), st.integers(1, 255)),
)
def test_the_offset_maps_key_walk_agrees_with_the_record_decoder(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
    codec: CompressionType,
    flip: tuple[int, int] | None,
) -> None:
    batch = bytearray(
        encode_batch(
            [Record(i * 2, i, k, v, tuple(h)) for i, (k, v, h) in enumerate(records)],
            compression=codec,
        )
    )
    if flip is not None and codec == CompressionType.NONE:
        position = 61 + flip[0] % max(len(batch) - 61, 1)
        batch[position] ^= flip[1]
    header = read_batch_header(batch, verify_crc=False)
    try:
        walked = list(record_keys(batch, header))
    except InvalidRecordsError:
        walked = None  # the only error it may raise
    try:
        decoded = [(r.key, r.offset_delta, r.value is None) for r in decode_records(batch, header)]
    except InvalidRecordsError:
        # Corrupt: the walk (keys only) may miss what the decoder sees; the rewrite that
        # follows decodes every record and reports it.
        return
    if flip is None:
        assert walked == decoded
    else:
        assert walked is None or walked == decoded


async def test_tombstones_stay_for_delete_retention_ms_then_go(tmp_path: Path) -> None:
    clock = FakeClock()
    async with compacted_log(tmp_path, clock, delete_retention_ms=str(DAY_MS)) as (manager, log):
        await append_ops(log, [(0, b"a"), (1, b"b")], clock)
        await append_ops(log, [(0, None)], clock)
        while log.active.base_offset <= 2:
            await append_ops(log, [(2, b"x" * 50)], clock)
        cleaner = cleaner_for(manager)
        await clean_once(cleaner, log)
        assert (2, KEYS[0], None) in await read_all(log), "the tombstone is kept"
        clock.now += DAY_MS - 1
        await clean_once(cleaner, log)
        assert (2, KEYS[0], None) in await read_all(log), "still inside delete.retention.ms"
        clock.now += 2
        await clean_once(cleaner, log)
        records = await read_all(log)
        assert all(key != KEYS[0] for _, key, _ in records), "the key is gone entirely"
        assert (1, KEYS[1], b"b") in records


async def test_rewritten_batches_keep_producer_fields_and_duplicates_are_still_detected(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with compacted_log(tmp_path, clock) as (manager, log):
        pid = await manager.allocate_producer_id()
        for seq in range(12):
            await append_ops(
                log, [(0, b"v%d" % seq), (1, b"w")], clock,
                producer_id=pid, producer_epoch=3, base_sequence=seq * 2,
            )  # fmt: skip
        cleaner = cleaner_for(manager)
        await clean_once(cleaner, log)
        result = await log.read(log.log_start_offset, 1 << 20)
        headers = [h for h, _ in iter_batches(result.records)]
        assert headers and all((h.producer_id, h.producer_epoch) == (pid, 3) for h in headers)
        assert all(h.base_sequence == h.base_offset for h in headers), "sequence = offset here"
        # The last batch is a duplicate after cleaning and after a restart.
        last = encode_batch(
            [Record(0, 0, KEYS[0], b"v11"), Record(1, 1, KEYS[1], b"w")],
            base_timestamp=clock.now, producer_id=pid, producer_epoch=3, base_sequence=22,
        )  # fmt: skip
        crash(manager)
        await manager.open()
        reloaded = manager.partition("c", 0)
        assert reloaded is not None
        assert (await reloaded.append(last, read_batch_header(last))).duplicate


async def test_aborted_records_go_and_markers_go_after_the_delete_horizon(tmp_path: Path) -> None:
    clock = FakeClock()
    async with compacted_log(tmp_path, clock, delete_retention_ms="1000") as (manager, log):
        aborted_pid = await manager.allocate_producer_id()
        committed_pid = await manager.allocate_producer_id()
        for pid in (aborted_pid, committed_pid):
            await append_ops(
                log, [(0, b"txn-%d" % pid)], clock,
                producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True,
            )  # fmt: skip
        await log.append_control(aborted_pid, 0, commit=False)
        await log.append_control(committed_pid, 0, commit=True)
        while log.active.base_offset <= 3:
            await append_ops(log, [(3, b"y" * 50)], clock)
        cleaner = cleaner_for(manager)
        await clean_once(cleaner, log)

        def batches() -> list[tuple[int, bool, int]]:
            return [(h.producer_id, h.is_control, h.record_count) for h, _ in found]

        found = list(iter_batches((await log.read(0, 1 << 20)).records))
        assert (aborted_pid, False, 1) not in batches(), "aborted records removed"
        assert (committed_pid, False, 1) in batches()
        assert (aborted_pid, True, 1) in batches(), "the emptied transaction's marker waits"
        clock.now += 1001
        await clean_once(cleaner, log)
        found = list(iter_batches((await log.read(0, 1 << 20)).records))
        assert (aborted_pid, True, 1) not in batches(), "removed after delete.retention.ms"
        assert (committed_pid, True, 1) in batches(), "a marker with records stays"
        assert (1, KEYS[0], b"txn-%d" % committed_pid) in await read_all(log)


@pytest.mark.parametrize("step", ["cleaned-written", "swap-committed", "swap-half-replaced"])
async def test_a_crash_between_the_steps_of_a_pass_loses_nothing(tmp_path: Path, step: str) -> None:
    clock = FakeClock()

    def fault(at: str) -> None:
        if at == step or (step == "swap-half-replaced" and at == "swap-committed"):
            raise InjectedCrash(at)

    async with compacted_log(tmp_path, clock) as (manager, log):
        for i in range(60):
            await append_ops(log, [(i % 5, b"v%d" % i)], clock)
        before = await read_all(log)
        latest = {key: (offset, value) for offset, key, value in before}
        with pytest.raises(InjectedCrash):
            await clean_once(cleaner_for(manager, fault), log)
        directory = log.directory
        if step == "swap-half-replaced":  # the index replaced, the .log not yet
            swap = next(directory.glob("*.index.swap"))
            os.replace(swap, directory / swap.name.removesuffix(".swap"))
        crash(manager)
        await manager.open()
        reloaded = manager.partition("c", 0)
        assert reloaded is not None
        after = await read_all(reloaded)
        assert {key: (o, v) for o, key, v in after} == latest
        assert not list(directory.glob("*.swap")) and not list(directory.glob("*.cleaned"))
        # A later pass completes the work.
        await clean_once(cleaner_for(manager), reloaded)
        assert {key: (o, v) for o, key, v in await read_all(reloaded)} == latest


def _flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("worker", ["thread", "process"])
async def test_a_corrupt_segment_marks_the_partition_uncleanable_and_nothing_else(
    tmp_path: Path, worker: str
) -> None:
    clock = FakeClock()
    async with compacted_log(tmp_path, clock) as (manager, log):
        for i in range(60):
            await append_ops(log, [(i % 5, b"value-%d" % i)], clock)
        first = log.segments[0]
        _flip_byte(first.log_path, first.size - 3)  # inside the last batch's records
        cleaner = cleaner_for(manager, worker=worker)
        assert await cleaner.clean_filthiest()
        assert ("c", 0) in cleaner.uncleanable
        assert not await cleaner.clean_filthiest(), "skipped from now on"
        assert not list(log.directory.glob("*.cleaned"))
        await append_ops(log, [(0, b"still-writable")], clock)
        samples = {s.name: s.values["value"] for s in cleaner.samples()}
        assert samples["uncleanable-partitions-count"] == 1


async def test_dirty_ratio_min_compaction_lag_and_max_compaction_lag_decide_what_is_cleaned(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    configs = {"min_cleanable_dirty_ratio": "0.9", "min_compaction_lag_ms": "5000"}
    async with compacted_log(tmp_path, clock, **configs) as (manager, log):
        for i in range(40):
            await append_ops(log, [(i % 3, b"v%d" % i)], clock)
        cleaner = cleaner_for(manager)
        found = cleaner.describe(log)
        assert found.segments == () and found.first_uncleanable_offset == 0, "too recent"
        clock.now += 5001
        found = cleaner.describe(log)
        assert found.dirty_ratio == 1.0 and found.segments
        assert await cleaner.clean_filthiest()
        after = cleaner.describe(log)
        assert after.dirty_bytes == 0 and after.first_dirty_offset == log.active.base_offset
        assert not await cleaner.clean_filthiest(), "nothing dirty left"
        assert cleaner.states[("c", 0)].last_cleaned_ms == clock.now


async def test_a_compacted_log_rolls_its_active_segment_by_max_compaction_lag_ms(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    configs = {"max_compaction_lag_ms": "1000", "segment_bytes": str(1 << 20)}
    async with compacted_log(tmp_path, clock, **configs) as (manager, log):
        assert log.config.segment_ms == 1000, "Kafka's maxSegmentMs"
        await append_ops(log, [(0, b"a"), (0, b"b")], clock)
        clock.now += 1500
        await append_ops(log, [(1, b"c")], clock)
        assert log.active.base_offset == 2, "rolled by age, so the old records can be cleaned"
        cleaner = cleaner_for(manager)
        found = cleaner.describe(log)
        assert found.must_clean, "dirty data older than max.compaction.lag.ms"
        assert await cleaner.clean_filthiest()
        assert [(o, v) for o, _, v in await read_all(log)] == [(1, b"b"), (2, b"c")]
        # Now with clean bytes the ratio is below 1.0: only the lag makes the log due.
        await manager.alter_topic_configs("c", {"min.cleanable.dirty.ratio": "1.0"})
        clock.now += 1500
        await append_ops(log, [(0, b"d")], clock)
        found = cleaner.describe(log)
        assert 0 < found.dirty_ratio < 1.0 and found.must_clean
        assert await cleaner.clean_filthiest(), "cleaned whatever its dirty ratio"
        assert cleaner.describe(log).first_dirty_offset == 3 == log.active.base_offset
        # k0@1 stays: its newer value is in the active segment, which is never cleaned.
        assert [(o, v) for o, _, v in await read_all(log)] == [(1, b"b"), (2, b"c"), (3, b"d")]


async def test_segments_deleted_during_a_pass_are_not_brought_back(tmp_path: Path) -> None:
    clock = FakeClock()
    async with compacted_log(tmp_path, clock, cleanup_policy="compact,delete") as (manager, log):
        for i in range(60):
            await append_ops(log, [(i % 5, b"v%d" % i)], clock)
        cleaner = cleaner_for(manager)
        found = cleaner.describe(log)
        pausing = trio.Event()
        resume = threading.Event()

        def fault(step: str) -> None:  # the pass, in its thread, waits after its first swap
            if step == "swap-committed" and not pausing.is_set():
                trio.from_thread.run_sync(pausing.set)
                resume.wait(10)

        cleaner = cleaner_for(manager, fault)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cleaner.clean, log, found)
            await pausing.wait()
            second_base = log.segments[1].base_offset
            await log.delete_records_before(second_base + 1)  # drops the first segment
            resume.set()
        assert log.segments[0].base_offset == second_base
        assert not list(log.directory.glob("*.swap")) and not list(log.directory.glob("*.cleaned"))
        crash(manager)
        await manager.open()
        reloaded = manager.partition("c", 0)
        assert reloaded is not None
        assert reloaded.segments[0].base_offset == second_base, "no swap resurrected it"
        assert reloaded.log_start_offset == second_base + 1, "the log start stays"
        latest = {KEYS[i % 5]: b"v%d" % i for i in range(60)}
        assert {k: v for _, k, v in await read_all(reloaded)} == latest
