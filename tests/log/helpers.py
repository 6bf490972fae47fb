"""Shared builders for the log tests: batches, configs and managers on tmp_path."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from broker.config import BrokerConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.protocol.records import (
    Record,
    RecordBatchHeader,
    encode_batch,
    iter_batches,
    iter_records,
    read_batch_header,
)

BASE_TS = 1_700_000_000_000


class FakeClock:
    """Milliseconds under the test's control."""

    def __init__(self, now: int = BASE_TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_batch(
    values: Sequence[bytes],
    *,
    timestamp: int = BASE_TS,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> tuple[bytes, RecordBatchHeader]:
    records = [Record(i, i, None, v) for i, v in enumerate(values)]
    data = encode_batch(
        records,
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    return data, read_batch_header(data)


async def append_values(
    log: PartitionLog, values: Sequence[bytes], **kwargs: int
) -> tuple[int, int]:
    data, header = make_batch(values, **kwargs)
    result = await log.append(data, header)
    return result.base_offset, result.last_offset


def config(tmp_path: Path, **overrides: str) -> BrokerConfig:
    raw = {"log.dirs": str(tmp_path / "logs")}
    raw.update({k.replace("_", "."): v for k, v in overrides.items()})
    return BrokerConfig(raw)


@asynccontextmanager
async def open_manager(
    cfg: BrokerConfig, clock: FakeClock | None = None
) -> AsyncIterator[LogManager]:
    """A LogManager opened and closed cleanly, as `run` does."""
    manager = LogManager(cfg, clock=clock)
    await manager.open()
    try:
        yield manager
    finally:
        with trio.CancelScope(shield=True):
            await manager.close()


def crash(manager: LogManager) -> None:
    """Simulate a process crash: descriptors close, nothing is flushed or marked."""
    for topic in manager.topics().values():
        for log in topic.partitions:
            for segment in log.segments:
                segment.close()
    for fd in manager._lock_fds:
        os.close(fd)
    manager._lock_fds.clear()
    # Nothing left for close() to do: no flush, no checkpoint, no clean marker.
    manager._topics.clear()
    manager._by_id.clear()
    manager._open = False


def decode_values(records: bytes | memoryview) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record, checking each batch's CRC on the way."""
    out: list[tuple[int, bytes | None]] = []
    for header, view in iter_batches(records):
        out.extend((r.offset, r.value) for r in iter_records(view, header))
    return out


async def read_all(log: PartitionLog, start: int | None = None) -> list[tuple[int, bytes | None]]:
    """Every record from ``start`` (default: log start) to the end, by fetching as a
    follower does (a consumer reads only below the high watermark)."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes | None]] = []
    while offset < log.log_end_offset:
        result = await log.read(offset, 4096, follower=True)
        records = [r for r in decode_values(result.records) if r[0] >= offset]
        assert records, f"no progress at offset {offset}"
        out.extend(records)
        offset = records[-1][0] + 1
    return out


async def stored_bytes(log: PartitionLog) -> bytes:
    """The log's bytes from its start to its end, every segment, as reads return them."""
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = bytes((await log.read(offset, 1 << 20)).records)
        assert chunk, f"no progress at {offset}"
        out += chunk
        offset = [header.last_offset for header, _ in iter_batches(chunk)][-1] + 1
    return out
