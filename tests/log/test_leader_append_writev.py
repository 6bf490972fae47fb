"""A leader's append writes the patched header and the request's records, not a copy; a
large batch from a worker thread, unless the Produce came on a quiet loop."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from broker.errors import KafkaError
from broker.log.log_segment import LogSegment
from broker.log.partition_log import QUIET_LOOP_WRITE_LIMIT, THREAD_WRITE_THRESHOLD
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import RecordBatchHeader
from broker.protocol.record_batch.validator import CLIENT_APPEND, CLIENT_APPEND_ON_LOOP
from broker.protocol.records import iter_batches
from tests.log.helpers import config, decode_values, make_batch, open_manager

WAIT_S = 10.0


async def test_short_writes_still_store_each_batch_whole_with_its_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_writev = os.writev

    def short_writev(fd: int, buffers: Sequence[memoryview]) -> int:
        # At most 7 bytes a call, so every boundary (inside the header, between the
        # header and the records, inside the records) is crossed by a short write.
        return real_writev(fd, [bytes(b"".join(bytes(b) for b in buffers)[:7])])

    monkeypatch.setattr(os, "writev", short_writev)
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        sent = []
        for i in range(3):
            data, header = make_batch([b"v%d" % i * 20, b"w%d" % i])
            # A view of a larger buffer, as a request's records are.
            framed = memoryview(b"\xff" * 5 + data + b"\xee" * 9)[5 : 5 + len(data)]
            result = await log.append(framed, header, CLIENT_APPEND)
            assert result.base_offset == 2 * i
            sent.append(data)
        read = await log.read(0, 1 << 20)
        batches = list(iter_batches(read.records))
        assert [h.base_offset for h, _ in batches] == [0, 2, 4]
        for (_, view), original in zip(batches, sent, strict=True):
            assert bytes(view[17:]) == original[17:]  # the CRC's part, byte for byte
        assert [v for _, v in decode_values(read.records)] == [
            b"v0" * 20,
            b"w0",
            b"v1" * 20,
            b"w1",
            b"v2" * 20,
            b"w2",
        ]


LARGE = make_batch([os.urandom(THREAD_WRITE_THRESHOLD)])
"""A batch written from a worker thread."""


class HeldWrites:
    """LogSegment.write held for large batches until `go_on` is set (the thread waits)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writing, self.go_on = threading.Event(), threading.Event()
        real_write = LogSegment.write

        def held_write(
            segment: LogSegment, data: bytes | memoryview, rest: bytes | memoryview = b""
        ) -> None:
            if len(data) + len(rest) >= THREAD_WRITE_THRESHOLD:
                self.writing.set()
                assert self.go_on.wait(WAIT_S)
            real_write(segment, data, rest)

        monkeypatch.setattr(LogSegment, "write", held_write)

    async def started(self) -> None:
        """Once the thread writes (the event loop running meanwhile: this task waits)."""
        assert await trio.to_thread.run_sync(self.writing.wait, WAIT_S)


async def test_a_large_batch_is_written_from_a_worker_thread_and_later_appends_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22 item 1: a 900 KiB Produce held the event loop for its whole write."""
    held = HeldWrites(monkeypatch)
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        large, large_header = LARGE
        small, small_header = make_batch([b"after"])
        offsets: list[int] = []

        async def append(data: bytes, header: RecordBatchHeader) -> None:
            offsets.append((await log.append(data, header, CLIENT_APPEND)).base_offset)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, large, large_header)
            await held.started()
            nursery.start_soon(append, small, small_header)
            await trio.sleep(0.05)
            assert offsets == [] and log.log_end_offset == 0, "nothing shows before the write"
            held.go_on.set()
        assert offsets == [0, 1]
        values = [v for _, v in decode_values((await log.read(0, 1 << 21)).records)]
        assert len(values) == 2 and values[1] == b"after"
        assert values[0] is not None and len(values[0]) == THREAD_WRITE_THRESHOLD


async def test_a_topic_deleted_while_a_large_batch_is_written_answers_unknown_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldWrites(monkeypatch)
    async with open_manager(config(tmp_path)) as manager:
        topic = await manager.create_topic("t", 1)
        errors: list[ErrorCode] = []

        async def append() -> None:
            with pytest.raises(KafkaError) as raised:
                await topic.partitions[0].append(*LARGE, CLIENT_APPEND)
            errors.append(raised.value.error_code)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append)
            await held.started()
            await manager.delete_topic("t")
            held.go_on.set()
        assert errors == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


async def test_on_a_quiet_loop_a_large_batch_is_written_on_the_loop_below_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19 item 7: no worker thread's round trip when no small request waits."""
    loop_thread = threading.get_ident()
    writers: list[tuple[int, bool]] = []
    real_write = LogSegment.write

    def recording_write(
        segment: LogSegment, data: bytes | memoryview, rest: bytes | memoryview = b""
    ) -> None:
        writers.append((len(data) + len(rest), threading.get_ident() == loop_thread))
        real_write(segment, data, rest)

    monkeypatch.setattr(LogSegment, "write", recording_write)
    too_large = make_batch([os.urandom(QUIET_LOOP_WRITE_LIMIT)])
    async with open_manager(config(tmp_path, message_max_bytes=str(1 << 21))) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await log.append(*LARGE, CLIENT_APPEND_ON_LOOP)
        await log.append(*too_large, CLIENT_APPEND_ON_LOOP)
        await log.append(*LARGE, CLIENT_APPEND)
        assert [on_loop for _, on_loop in writers] == [True, False, False]
        assert [h.base_offset for h, _ in iter_batches((await log.read(0, 1 << 22)).records)] == [
            0,
            1,
            2,
        ]


async def test_a_batch_over_message_max_bytes_is_refused_without_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header says it is too large: its records are neither walked nor sent to a
    thread to be walked (a flood of oversized frames costs a hand-off each otherwise)."""
    data, header = make_batch([os.urandom(1024) for _ in range(1100)])  # walked in a thread
    threads: list[object] = []

    async def no_thread(fn: object, *args: object, **kwargs: object) -> object:
        threads.append(fn)
        raise AssertionError("handed to a worker thread")

    async with open_manager(config(tmp_path, message_max_bytes=str(1 << 20))) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        with monkeypatch.context() as patched, pytest.raises(InvalidRecordsError) as refused:
            patched.setattr(trio.to_thread, "run_sync", no_thread)
            await log.append(data, header, CLIENT_APPEND)
    assert refused.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert threads == []
    assert log.log_end_offset == 0
