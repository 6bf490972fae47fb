"""A batch header destroyed on disk is reported to readers, never a silent empty read.

Kafka answers a Fetch that meets a corrupt batch with CORRUPT_MESSAGE; before this,
the scan for the offset stopped at the bad header and Fetch returned no error and no
bytes below the high watermark, so consumers waited for ever.
"""

from __future__ import annotations

import os
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.log.batch_framing import framing_problem, resync_position
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import iter_batches, read_batch_header
from tests.log.helpers import append_values, config, make_batch, open_manager

BATCHES = 30
INDEX_INTERVAL = "300"  # an index entry every few batches of ~80 bytes


async def fill(log: PartitionLog, batches: int = BATCHES) -> None:
    for i in range(batches):
        await append_values(log, [b"a%03d" % i, b"b%03d" % i])


def batch_positions(log: PartitionLog, segment_index: int = 0) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of every batch of a segment, from the file."""
    data = log.segments[segment_index].log_path.read_bytes()
    out, pos = [], 0
    for header, view in iter_batches(data):
        out.append((pos, header.base_offset, header.last_offset))
        pos += len(view)
    return out


def destroy(log: PartitionLog, position: int, garbage: bytes, segment_index: int = 0) -> None:
    """Overwrite bytes of a segment on disk, under the running log (its reads see it)."""
    fd = os.open(log.segments[segment_index].log_path, os.O_WRONLY)
    try:
        os.pwrite(fd, garbage, position)
    finally:
        os.close(fd)


async def outcome(log: PartitionLog, offset: int) -> KafkaError | list[int]:
    """The error of a read at `offset`, or the base offsets of the batches it returned."""
    try:
        result = await log.read(offset, 1 << 20)
    except KafkaError as exc:
        return exc
    return [header.base_offset for header, _ in iter_batches(result.records)]


async def test_a_destroyed_header_answers_corrupt_message_until_the_next_readable_batch(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path, log_index_interval_bytes=INDEX_INTERVAL)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await fill(log)
        positions = batch_positions(log)
        position, first_bad, last_bad = positions[12]
        destroy(log, position, bytes(61))

        before = await outcome(log, 0)
        assert before == [base for _, base, _ in positions[:12]], "stops before the bad batch"
        error = await outcome(log, first_bad)
        assert isinstance(error, KafkaError) and error.error_code == ErrorCode.CORRUPT_MESSAGE
        assert f"position {position} of {log.segments[0].log_path}" in error.message
        next_readable = int(error.message.rsplit("next readable: ", 1)[1].rstrip(")"))
        assert next_readable == last_bad + 1, "the batches after it are found again"
        for offset in range(first_bad, next_readable):
            unreadable = await outcome(log, offset)
            assert isinstance(unreadable, KafkaError), f"offset {offset} read {unreadable}"
        after = await outcome(log, next_readable)
        assert isinstance(after, list) and after[0] == next_readable
        assert after[-1] == positions[-1][1], "everything after it reads as before"


@asynccontextmanager
async def segmented_log(tmp_path: Path) -> AsyncIterator[PartitionLog]:
    """A filled log of several small segments without offset index entries."""
    cfg = config(tmp_path, log_segment_bytes="1000", log_index_interval_bytes="100000")
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await fill(log)
        assert len(log.segments) > 2
        yield log


async def test_a_bad_length_in_an_older_segment_without_index_entries_loses_only_its_batch(
    tmp_path: Path,
) -> None:
    async with segmented_log(tmp_path) as log:
        positions = batch_positions(log, 0)
        position, first_bad, _ = positions[3]
        destroy(log, position + 8, (2**31 - 1).to_bytes(4, "big"))  # its length field

        error = await outcome(log, first_bad)
        assert isinstance(error, KafkaError) and error.error_code == ErrorCode.CORRUPT_MESSAGE
        assert "would end past the segment" in error.message
        assert error.message.endswith(f"(next readable: {positions[4][1]})")
        assert await outcome(log, positions[4][1]) == [base for _, base, _ in positions[4:]]


async def test_a_bad_last_batch_of_an_older_segment_is_skipped_to_the_next_segment(
    tmp_path: Path,
) -> None:
    async with segmented_log(tmp_path) as log:
        position, first_bad, _ = batch_positions(log, 0)[-1]
        destroy(log, position, bytes(61))

        error = await outcome(log, first_bad)
        assert isinstance(error, KafkaError)
        next_base = log.segments[1].base_offset
        assert error.message.endswith(f"(next readable: {next_base})")
        after = await outcome(log, next_base)
        assert isinstance(after, list) and after[0] == next_base


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    victim=st.integers(min_value=1, max_value=BATCHES - 2),
    garbage=st.binary(min_size=17, max_size=61),
)
def test_reads_around_a_destroyed_header_return_only_intact_batches_or_corrupt_message(
    tmp_path_factory: pytest.TempPathFactory, victim: int, garbage: bytes
) -> None:
    assume(garbage[16] != 2)  # the magic byte is gone: the header is destroyed

    async def check() -> None:
        cfg = config(tmp_path_factory.mktemp("log"), log_index_interval_bytes=INDEX_INTERVAL)
        async with open_manager(cfg) as manager:
            log = (await manager.create_topic("t", 1)).partitions[0]
            await fill(log)
            positions = batch_positions(log)
            intact = {base for _, base, _ in positions}
            intact.discard(positions[victim][1])
            destroy(log, positions[victim][0], garbage)
            unreadable = []
            for offset in range(log.log_end_offset):
                result = await outcome(log, offset)
                if isinstance(result, KafkaError):
                    assert result.error_code == ErrorCode.CORRUPT_MESSAGE
                    unreadable.append(offset)
                else:
                    assert result and set(result) <= intact, (offset, result)
            first_bad, last_bad = positions[victim][1], positions[victim][2]
            assert unreadable == list(range(first_bad, last_bad + 1)), "only its own offsets"

    trio.run(check)


def test_framing_accepts_a_real_header_and_names_what_is_wrong_with_a_bad_one() -> None:
    data, _ = make_batch([b"x"])
    header = read_batch_header(data)
    fits = {"file_size": len(data), "min_base_offset": 0, "next_offset": 1}
    assert framing_problem(header, 0, **fits) is None
    assert "past the segment" in (framing_problem(header, 1, **fits) or "")
    assert "not below the segment's end" in (
        framing_problem(header, 0, file_size=len(data), min_base_offset=0, next_offset=0) or ""
    )
    assert "differs from the index" in (
        framing_problem(header, 0, **fits, indexed_last_offset=5) or ""
    )


def test_resync_finds_the_batch_whose_chain_lands_on_the_boundary_not_a_stray_magic_byte() -> None:
    batches = [make_batch([b"v%d" % i])[0] for i in range(3)]
    # Offsets 5, 6, 7 in order; a stray byte 2 where a magic byte would be comes first.
    chain = b"".join(struct.pack(">q", 5 + i) + batch[8:] for i, batch in enumerate(batches))
    stray = bytearray(40)
    stray[16] = 2
    window = bytes(stray) + chain
    fits = {"min_base_offset": 5, "next_offset": 8}
    assert resync_position(window, **fits) == len(stray)
    assert resync_position(window[:-1], **fits) is None, "a chain must end on the boundary"
    assert resync_position(window, min_base_offset=5, next_offset=7) is None
