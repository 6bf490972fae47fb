"""One cleaning pass over one partition, the part that runs in a worker thread
(Kafka's Cleaner.doClean): build the offset map over the dirty range, then rewrite
every cleanable segment into a `.cleaned` replacement and commit it as `.swap` files
(broker/log/segment_swap.py). The event loop then puts the replacements in place
(`PartitionLog.install_cleaned`).

The pass only reads segments that are no longer appended to and writes files nobody
else opens, so it shares nothing mutable with the request path.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from broker.log.cleaner_filter import CleanResult, OffsetMap, PassState, clean_batch
from broker.log.log_segment import INT32_MAX, LOG_SUFFIX, LogSegment, segment_file_name
from broker.log.segment_swap import CLEANED_SUFFIX, commit_cleaned, discard_cleaned
from broker.log.transaction_index import AbortedTxn
from broker.protocol.record_batch.batch_checks import read_batch_header
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchHeader,
    batch_size_at,
)

FaultHook = Callable[[str], None]
"""Tests inject a crash between the steps of a pass (called with the step's name)."""


class CorruptSegmentError(Exception):
    """A batch of a segment being cleaned fails its CRC or does not decode."""


class PassAborted(Exception):
    """The cleaner is stopping (broker shutdown)."""


class Throttler:
    """log.cleaner.io.max.bytes.per.second, as Kafka's Throttler: after each chunk of
    I/O, sleep (in the worker thread) long enough to keep the average rate at most
    the limit."""

    def __init__(self, bytes_per_second: float, stop: threading.Event) -> None:
        self.bytes_per_second = bytes_per_second
        self._stop = stop
        self._start = time.monotonic()
        self._bytes = 0.0

    def check_stop(self) -> None:
        if self._stop.is_set():
            raise PassAborted

    def maybe_throttle(self, nbytes: int) -> None:
        self.check_stop()
        self._bytes += nbytes
        if self.bytes_per_second <= 0 or self.bytes_per_second == float("inf"):
            return
        elapsed = time.monotonic() - self._start
        wait = self._bytes / self.bytes_per_second - elapsed
        if wait > 0:
            self._stop.wait(wait)


@attrs.frozen
class SegmentSource:
    """An inactive segment as the pass reads it: by path, through its own descriptor
    (so the pass can run in another process; retention unlinking the file meanwhile
    is harmless once it is open, an OSError before)."""

    directory: str
    base_offset: int
    next_offset: int
    size: int
    created_ms: int
    aborted: tuple[AbortedTxn, ...]  # its `.txnindex` entries

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, LOG_SUFFIX))

    @classmethod
    def of(cls, segment: LogSegment) -> SegmentSource:
        return cls(
            str(segment.directory),
            segment.base_offset,
            segment.next_offset,
            segment.size,
            segment.created_ms,
            tuple(segment.txn_index.entries),
        )


@attrs.frozen
class PassPlan:
    """What the event loop hands the worker: the segments to clean (all below the
    first uncleanable offset, oldest first) and where the dirty range starts."""

    segments: tuple[SegmentSource, ...]
    first_dirty_offset: int
    aborted: tuple[AbortedTxn, ...]
    last_batch_of_producer: dict[int, int]
    now_ms: int
    delete_retention_ms: int
    max_map_entries: int
    index_interval_bytes: int
    max_index_entries: int


@attrs.frozen
class CleanedSegment:
    """One segment's outcome: `replaced` when its `.swap` files are committed,
    otherwise it had nothing left and is to be deleted."""

    base_offset: int
    replaced: bool


@attrs.frozen
class PassOutcome:
    cleaned: tuple[CleanedSegment, ...]
    end_offset: int  # the next pass's first dirty offset
    bytes_read: int
    bytes_written: int
    records_read: int
    records_written: int
    buffer_utilization: float  # the offset map's fill, 0..1


def run_pass(plan: PassPlan, throttler: Throttler, fault: FaultHook | None = None) -> PassOutcome:
    """The whole pass (worker thread). Raises CorruptSegmentError (nothing is
    installed; the `.cleaned` files are removed), PassAborted, OSError."""
    offsets = OffsetMap(plan.max_map_entries)
    end_offset = plan.first_dirty_offset
    for segment in plan.segments:
        if segment.next_offset <= plan.first_dirty_offset:
            continue
        for data, header in _batches(segment, throttler):
            try:
                offsets.add_batch(data, header)
            except InvalidRecordsError as exc:
                raise CorruptSegmentError(f"{segment.log_path}: {exc}") from exc
        end_offset = segment.next_offset
        if offsets.is_full:
            break
    targets = [s for s in plan.segments if s.next_offset <= end_offset]
    state = PassState(last_batch_of_producer=dict(plan.last_batch_of_producer))
    state.add_aborted(plan.aborted)
    outcome: list[CleanedSegment] = []
    totals = [0, 0, 0, 0]
    try:
        for i, segment in enumerate(targets):
            cleaned = _clean_segment(segment, plan, offsets, state, throttler, totals)
            keep = cleaned.size > 0 or i == 0  # the first segment holds the log start
            if keep:
                cleaned.on_become_inactive()
                cleaned.flush()
            cleaned.close()
            if fault is not None:
                fault("cleaned-written")
            directory = Path(segment.directory)
            if keep:
                commit_cleaned(directory, segment.base_offset)
                if fault is not None:
                    fault("swap-committed")
            else:
                discard_cleaned(directory, segment.base_offset)
            outcome.append(CleanedSegment(segment.base_offset, keep))
    except BaseException:
        if fault is None:  # an injected crash leaves the files as a kill -9 would
            for segment in targets:
                discard_cleaned(Path(segment.directory), segment.base_offset)
        raise
    utilization = len(offsets.latest) / offsets.max_entries
    read, written, records_in, records_out = totals
    return PassOutcome(
        tuple(outcome), end_offset, read, written, records_in, records_out, utilization
    )


def _batches(
    segment: SegmentSource, throttler: Throttler
) -> Iterator[tuple[bytes, RecordBatchHeader]]:
    """Every batch of a segment, CRC checked and offsets ascending, its reads counted by
    the throttler. Raises CorruptSegmentError for a batch that fails its checks."""
    fd = os.open(segment.log_path, os.O_RDONLY)
    try:
        expected = segment.base_offset
        position = 0
        while position < segment.size:
            throttler.check_stop()
            head = os.pread(fd, LOG_OVERHEAD, position)
            if len(head) < LOG_OVERHEAD:
                raise CorruptSegmentError(f"{segment.log_path}: cut short at {position}")
            size = batch_size_at(head)
            data = os.pread(fd, size, position) if size >= BATCH_HEADER_SIZE else b""
            if len(data) < max(size, BATCH_HEADER_SIZE):
                raise CorruptSegmentError(f"{segment.log_path}: batch at {position} is cut short")
            try:
                header = read_batch_header(data, 0, verify_crc=True)
            except InvalidRecordsError as exc:
                raise CorruptSegmentError(
                    f"{segment.log_path}: batch at {position}: {exc}"
                ) from exc
            if (
                header.base_offset < expected
                or header.last_offset - segment.base_offset > INT32_MAX
            ):
                raise CorruptSegmentError(
                    f"{segment.log_path}: batch at {position} has offset {header.base_offset}, "
                    f"expected at least {expected}"
                )
            expected = header.last_offset + 1
            throttler.maybe_throttle(size)
            yield data, header
            position += size
    finally:
        os.close(fd)


def _clean_segment(
    segment: SegmentSource,
    plan: PassPlan,
    offsets: OffsetMap,
    state: PassState,
    throttler: Throttler,
    totals: list[int],
) -> LogSegment:
    """Write the retained batches of ``segment`` into its `.cleaned` replacement,
    with the aborted-transaction entries of the segment."""
    directory = Path(segment.directory)
    cleaned = LogSegment(
        directory,
        segment.base_offset,
        index_interval_bytes=plan.index_interval_bytes,
        created_ms=segment.created_ms,
        max_index_entries=plan.max_index_entries,
        file_suffix=CLEANED_SUFFIX,
    )
    discard_cleaned(directory, segment.base_offset)
    cleaned.open()
    try:
        for data, header in _batches(segment, throttler):
            try:
                result: CleanResult = clean_batch(
                    data,
                    header,
                    offsets,
                    state,
                    now_ms=plan.now_ms,
                    delete_retention_ms=plan.delete_retention_ms,
                )
            except InvalidRecordsError as exc:
                raise CorruptSegmentError(f"{segment.log_path}: {exc}") from exc
            totals[0] += len(data)
            totals[2] += result.records_in
            totals[3] += result.records_out
            if result.data is not None:
                out = bytes(result.data)
                cleaned.append(out, read_batch_header(out, 0, verify_crc=False))
                totals[1] += len(out)
                throttler.maybe_throttle(len(out))
        for entry in segment.aborted:
            cleaned.txn_index.append(entry)
    except BaseException:
        cleaned.close()
        raise
    return cleaned
