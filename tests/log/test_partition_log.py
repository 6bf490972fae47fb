"""Append, read, segments, indexes, timestamps and retention of one partition."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.log.log_segment import LOG_SUFFIX
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import iter_batches
from tests.log.helpers import (
    BASE_TS,
    FakeClock,
    append_values,
    config,
    decode_values,
    make_batch,
    open_manager,
    read_all,
)


async def test_appends_get_consecutive_offsets_and_read_back_byte_for_byte(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        sent = []
        for i in range(5):
            data, header = make_batch([b"a%d" % i, b"b%d" % i, b"c%d" % i])
            result = await log.append(data, header)
            assert (result.base_offset, result.last_offset) == (3 * i, 3 * i + 2)
            assert result.log_append_time_ms == -1
            sent.append(data)
        read = await log.read(0, 1 << 20)
        batches = list(iter_batches(read.records))
        assert [h.base_offset for h, _ in batches] == [0, 3, 6, 9, 12]
        # Only the base offset and leader epoch (outside the CRC) were rewritten.
        for (header, view), original in zip(batches, sent, strict=True):
            assert bytes(view[17:]) == original[17:]
            assert header.partition_leader_epoch == 0
        assert read.high_watermark == read.last_stable_offset == log.log_end_offset == 15
        assert decode_values(read.records)[4] == (4, b"b1")


async def test_log_append_time_stamps_the_batch_with_the_broker_clock(tmp_path: Path) -> None:
    clock = FakeClock(BASE_TS + 5000)
    async with open_manager(config(tmp_path), clock) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        data, header = make_batch([b"x"], timestamp=BASE_TS)
        result = await log.append(data, header, log_append_time=True)
        assert result.log_append_time_ms == clock.now
        ((stored, _),) = iter_batches((await log.read(0, 1000)).records)
        assert stored.max_timestamp == clock.now and stored.timestamp_type == 1


async def test_read_from_the_middle_of_a_batch_returns_the_containing_batch(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_values(log, [b"0", b"1", b"2"])
        await append_values(log, [b"3", b"4", b"5"])
        read = await log.read(4, 1 << 20)
        assert [h.base_offset for h, _ in iter_batches(read.records)] == [3]


async def test_max_bytes_cuts_at_whole_batches_and_min_one_batch_returns_an_oversized_first(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for _ in range(4):
            await append_values(log, [b"x" * 100])
        size = len(make_batch([b"x" * 100])[0])
        read = await log.read(0, 2 * size + size // 2)
        assert len(read.records) == 2 * size
        assert len((await log.read(0, 10)).records) == size
        assert len((await log.read(0, 10, min_one_batch=False)).records) == 0


async def test_offsets_outside_the_log_are_out_of_range_and_the_end_reads_empty(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_values(log, [b"a", b"b"])
        assert len((await log.read(2, 1000)).records) == 0
        with pytest.raises(KafkaError) as above:
            await log.read(3, 1000)
        assert above.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        await log.delete_records_before(1)
        with pytest.raises(KafkaError) as below:
            await log.read(0, 1000)
        assert below.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_segments_roll_by_size_and_reads_cross_them(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path, log_segment_bytes="1000")) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for i in range(40):
            await append_values(log, [b"v%03d" % i, b"w%03d" % i])
        assert len(log.segments) > 3
        assert all(s.size <= 1000 for s in log.segments)
        names = sorted(p.name for p in log.directory.glob("*" + LOG_SUFFIX))
        assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
        values = await read_all(log)
        assert [o for o, _ in values] == list(range(80))
        assert values[41] == (41, b"w020")


async def test_segments_roll_by_time(tmp_path: Path) -> None:
    clock = FakeClock()
    async with open_manager(config(tmp_path, log_roll_ms="1000"), clock) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_values(log, [b"a"], timestamp=clock.now)
        clock.now += 500
        await append_values(log, [b"b"], timestamp=clock.now)
        assert len(log.segments) == 1
        clock.now += 600
        await append_values(log, [b"c"], timestamp=clock.now)
        assert [s.base_offset for s in log.segments] == [0, 2]
        assert await read_all(log) == [(0, b"a"), (1, b"b"), (2, b"c")]


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=40),
    value_len=st.integers(1, 300),
    reads=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 3000)), max_size=20),
)
def test_offset_index_lookups_agree_with_a_model(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    value_len: int,
    reads: list[tuple[int, int]],
) -> None:
    tmp_path = tmp_path_factory.mktemp("model")
    cfg = config(tmp_path, log_segment_bytes="3000", log_index_interval_bytes="200")

    async def scenario() -> None:
        model: list[tuple[int, int]] = []  # (base, last) per batch
        async with open_manager(cfg) as manager:
            log = (await manager.create_topic("t", 1)).partitions[0]
            for n in sizes:
                model.append(await append_values(log, [b"v" * value_len] * n))
            end = model[-1][1] + 1
            for offset, max_bytes in reads:
                offset %= end + 1
                if offset == end:
                    assert len((await log.read(offset, max_bytes)).records) == 0
                    continue
                batches = [h for h, _ in iter_batches((await log.read(offset, max_bytes)).records)]
                expected = next(b for b in model if b[0] <= offset <= b[1])
                assert (batches[0].base_offset, batches[0].last_offset) == expected
                assert sum(h.size_in_bytes for h in batches[1:]) <= max_bytes
                for previous, current in itertools.pairwise(batches):
                    assert current.base_offset == previous.last_offset + 1

    trio.run(scenario)


async def test_offset_for_timestamp_and_max_timestamp_use_the_time_index(tmp_path: Path) -> None:
    cfg = config(tmp_path, log_segment_bytes="600", log_index_interval_bytes="100")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        assert log.max_timestamp() == (-1, -1)
        assert log.offset_for_timestamp(0) is None
        # Two records per batch, 1 ms apart; batches 10 ms apart; one out of order.
        stamps = [BASE_TS + 10 * i for i in range(30)]
        stamps[20] = BASE_TS + 1000
        for ts in stamps:
            await append_values(log, [b"x" * 40, b"y" * 40], timestamp=ts)
        assert len(log.segments) > 2
        assert sum(len(s.time_index) for s in log.segments) > 0
        assert log.max_timestamp() == (41, BASE_TS + 1001)
        assert log.offset_for_timestamp(BASE_TS + 51) == (11, BASE_TS + 51)
        assert log.offset_for_timestamp(BASE_TS + 55) == (12, BASE_TS + 60)
        assert log.offset_for_timestamp(BASE_TS + 1001) == (41, BASE_TS + 1001)
        assert log.offset_for_timestamp(BASE_TS + 1002) is None


async def test_retention_by_bytes_deletes_whole_old_segments_but_never_the_active_one(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path, log_segment_bytes="1000", log_retention_bytes="1500")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for _ in range(30):
            await append_values(log, [b"x" * 100])
        before = [s.base_offset for s in log.segments]
        deleted = await manager.run_retention_now()
        assert deleted == len(before) - len(log.segments) > 0
        assert (
            log.size_bytes - log.segments[0].size < 1500 <= log.size_bytes or len(log.segments) == 1
        )
        assert log.log_start_offset == log.segments[0].base_offset > 0
        assert not (log.directory / f"{before[0]:020d}.log").exists()
        assert [o for o, _ in await read_all(log)] == list(range(log.log_start_offset, 30))
    cfg_tiny = config(tmp_path, log_segment_bytes="1000", log_retention_bytes="0")
    async with open_manager(cfg_tiny) as manager:
        reopened = manager.partition("t", 0)
        assert reopened is not None
        log = reopened
        await manager.run_retention_now()
        assert len(log.segments) == 1 and log.segments[0].size > 0
        assert log.log_end_offset == 30


async def test_retention_by_time_deletes_segments_whose_newest_record_is_too_old(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    cfg = config(tmp_path, log_segment_bytes="500", log_retention_ms="10000")
    async with open_manager(cfg, clock) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for i in range(12):
            await append_values(log, [b"x" * 100], timestamp=BASE_TS + i * 1000)
        segments = len(log.segments)
        assert segments >= 3
        clock.now = BASE_TS + 11_000 + 5_000  # the first ~5 records are now too old
        await manager.run_retention_now()
        assert 1 <= len(log.segments) < segments
        for segment in log.segments[:-1]:
            assert clock.now - segment.max_timestamp <= 10000
        assert log.log_start_offset == log.segments[0].base_offset
        clock.now += 10**9
        await manager.run_retention_now()
        assert len(log.segments) == 1 and log.log_end_offset == 12


async def test_delete_records_advances_the_log_start_and_survives_restart(tmp_path: Path) -> None:
    cfg = config(tmp_path, log_segment_bytes="600")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for _ in range(20):
            await append_values(log, [b"x" * 50, b"y" * 50])
        first_segments = len(log.segments)
        event = log.data_appended()
        assert await log.delete_records_before(15) == 15
        assert event.is_set()
        assert len(log.segments) < first_segments
        assert log.segments[0].base_offset <= 15
        assert (await read_all(log))[0] == (15, b"y" * 50)
        assert await log.delete_records_before(3) == 15
        with pytest.raises(KafkaError) as too_far:
            await log.delete_records_before(41)
        assert too_far.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    async with open_manager(cfg) as manager:
        reopened = manager.partition("t", 0)
        assert reopened is not None
        log = reopened
        assert log.log_start_offset == 15
        assert await log.delete_records_before(-1) == 40 == log.log_start_offset
        assert len((await log.read(40, 100)).records) == 0


async def test_data_appended_fires_on_the_next_append_only(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        event = log.data_appended()
        assert not event.is_set()
        woke = []

        async def waiter() -> None:
            await event.wait()
            woke.append(log.log_end_offset)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert woke == []
            await append_values(log, [b"a"])
        assert woke == [1]
        assert not log.data_appended().is_set()


async def test_batches_larger_than_a_segment_are_refused(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path, log_segment_bytes="200")) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        data, header = make_batch([b"x" * 300])
        with pytest.raises(KafkaError) as error:
            await log.append(data, header)
        assert error.value.error_code == ErrorCode.RECORD_LIST_TOO_LARGE
        assert log.log_end_offset == 0
