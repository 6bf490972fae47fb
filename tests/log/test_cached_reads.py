"""Reads the page cache holds are copied on the event loop; reads that would wait for the
disk go to a worker thread (broker/log/partition_log.py, CACHED_READ_ON_LOOP_LIMIT).

What a follower or a consumer at the log's end reads was written moments ago: handing
that copy to a thread cost more CPU than the copy (measured: 0.77x the CPU per fetched
record without the hand-off). A read from the disk may wait without bound, so the event
loop must never make it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.log.log_segment import LogSegment
from broker.log.partition_log import (
    CACHED_READ_ON_LOOP_LIMIT,
    THREAD_READ_THRESHOLD,
    PartitionLog,
)
from broker.protocol.record_batch.validator import CLIENT_APPEND
from tests.log.helpers import config, make_batch, open_manager

VALUE = os.urandom(1024)


@asynccontextmanager
async def log_of(tmp_path: Path, records: int) -> AsyncIterator[PartitionLog]:
    """A partition holding `records` 1 KiB records, written just now."""
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for _ in range(records // 100):
            data, header = make_batch([VALUE] * 100)
            await log.append(data, header, CLIENT_APPEND)
        log.update_high_watermark(log.log_end_offset)
        yield log


def counting_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> list[Callable[..., Any]]:
    """Every function handed to a worker thread from now on (still run there)."""
    handed: list[Callable[..., Any]] = []
    real = trio.to_thread.run_sync

    async def run_sync(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed.append(fn)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", run_sync)
    return handed


def drop_from_page_cache(segment: LogSegment) -> None:
    fd = os.open(segment.log_path, os.O_RDONLY)
    try:
        os.fsync(fd)  # only clean pages can be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


async def test_a_read_of_what_was_just_written_is_copied_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with log_of(tmp_path, 600) as log:
        handed = counting_threads(monkeypatch)
        read = await log.read(0, 512 * 1024)
        monkeypatch.undo()
    assert len(read.records) > THREAD_READ_THRESHOLD
    assert handed == []


async def test_a_read_the_page_cache_does_not_hold_goes_to_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with log_of(tmp_path, 600) as log:
        drop_from_page_cache(log.active)
        assert not log.active.in_page_cache(0, 4096)
        handed = counting_threads(monkeypatch)
        read = await log.read(0, 512 * 1024)
        monkeypatch.undo()
        assert len(handed) == 1
        # Read once, the range is cached again: the next read stays on the loop.
        assert log.active.in_page_cache(0, len(read.records))


async def test_a_cached_read_larger_than_the_limit_still_goes_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with log_of(tmp_path, 1200) as log:
        assert log.active.size > CACHED_READ_ON_LOOP_LIMIT + 4096  # the read takes it all
        assert log.active.in_page_cache(0, log.active.size)
        handed = counting_threads(monkeypatch)
        read = await log.read(0, CACHED_READ_ON_LOOP_LIMIT + 4096)
        monkeypatch.undo()
    assert len(read.records) > THREAD_READ_THRESHOLD
    assert len(handed) == 1


@pytest.mark.parametrize(
    "kernel_says",
    [BlockingIOError(11, "not cached"), OSError(95, "EOPNOTSUPP"), OSError(22, "EINVAL")],
)
async def test_a_kernel_that_cannot_say_means_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_says: OSError
) -> None:
    async with log_of(tmp_path, 100) as log:

        def preadv(*_: object) -> int:
            raise kernel_says

        monkeypatch.setattr(os, "preadv", preadv)
        assert not log.active.in_page_cache(0, 100)


async def test_no_range_past_the_end_or_empty_counts_as_cached(tmp_path: Path) -> None:
    async with log_of(tmp_path, 100) as log:
        size = log.active.size
        assert log.active.in_page_cache(0, size)
        assert not log.active.in_page_cache(0, size + 1)
        assert not log.active.in_page_cache(0, 0)
