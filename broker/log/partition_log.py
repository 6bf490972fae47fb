"""One partition's log: an ordered list of segments, the idempotent-producer state
and the offsets (log start, log end, recovery point) that bound it.

Concurrency model (all on the Trio event loop unless stated): `append` validates,
writes and indexes the batch synchronously (page-cache writes, no await between
choosing the offset and writing it, so appends never interleave), then awaits the
flush policy. fsyncs run in a worker thread under `_flush_lock`; appenders that
arrive during an fsync wait for the lock and usually find their batch already
covered (group commit). Reads locate the batch synchronously through the offset
index and copy large ranges in a worker thread while holding the segment
(`LogSegment.acquire`) so retention cannot close it underneath.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import trio

from broker.errors import KafkaError
from broker.log._files import atomic_write
from broker.log.batch_framing import CorruptBatchError
from broker.log.log_config import LogConfig
from broker.log.log_segment import LOG_SUFFIX, LogSegment
from broker.log.log_truncation import delete_snapshots_after, truncation_steps, unlink_newest_first
from broker.log.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager, snapshot_file_name
from broker.log.results import AppendResult, ReadResult
from broker.log.segment_swap import discard_cleaned, finish_interrupted_swaps, replace_with_swap
from broker.log.sparse_index import CorruptIndexError
from broker.log.transaction_index import AbortedTxn, merge_unique
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.batch_checks import iter_batches
from broker.protocol.record_batch.control import (
    CONTROL_COMMIT,
    control_batch,
    control_coordinator_epoch,
    control_type,
)
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    RecordBatchHeader,
    batch_size_at,
    crc_at,
    crc_of,
    frame_at,
    parse_header,
)
from broker.protocol.record_batch.record_sinks import iter_records
from broker.protocol.record_batch.validator import ClientAppend, LogValidator, assign_offsets
from broker.replication.leader_epoch_cache import LeaderEpochCache
from broker.replication.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    MalformedCheckpoint,
    read_checkpoint,
    write_checkpoint,
)

logger = logging.getLogger(__name__)

# Reads larger than this copy in a worker thread; smaller ones are a single
# pread from the page cache, cheaper than a thread round trip (bench/bench_log.py).
THREAD_READ_THRESHOLD = 64 * 1024
# ... unless the range is in the page cache (LogSegment.in_page_cache) and at most this
# large: then the read is a memory copy (about 0.1 ms a MiB), cheaper on the loop than a
# thread's round trip (two scheduler rounds, the GIL's hand-overs). What a follower or a
# consumer at the log's end reads was written moments ago, so it is there; a read from
# the disk, whose wait is unbounded, still goes to a thread.
CACHED_READ_ON_LOOP_LIMIT = 1 << 20
# Batches at least this large are written in a worker thread: a write of a few hundred
# KiB into the page cache held the event loop for 0.2-1.3 ms on the loaded 2-core
# machine, most of a 900 KiB Produce's time there and every bystander's wait behind it
# (issue 22 item 1). Smaller ones are cheaper written than sent to a thread.
THREAD_WRITE_THRESHOLD = 256 * 1024
# ... unless the Produce came while the event loop has no small request to protect
# (ClientAppend.write_on_loop): then batches below this are written on the loop, which
# spares the thread's round trip (two scheduler rounds and the GIL's hand-overs; 5-10 %
# of a 1 MiB Produce's CPU).
QUIET_LOOP_WRITE_LIMIT = 1 << 20
# A client's batch is validated in a worker thread from this many records on: about
# 2 ms of the event loop (the record walk takes about 0.5 us a record).
VALIDATION_IN_THREAD_FROM = 4000
# ... or from this many bytes: the CRC alone takes about 0.07 ms per MiB (3.5 ms for a
# batch of 50 MB on the event loop, every other connection waiting). crc32c releases the
# GIL for large buffers, so the loop runs meanwhile.
VALIDATION_IN_THREAD_BYTES = 1 << 20
_KEEP_SNAPSHOTS = 2
_LEFTOVER_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")

Clock = Callable[[], int]


def _whole_batches_end(buf: bytes, length: int, min_base_offset: int, next_offset: int) -> int:
    """Bytes of ``buf[:length]`` that form whole batches, up to the first whose header
    is not framed as a batch of the segment (offsets from ``min_base_offset``, below
    ``next_offset``): a read starting there reports it (`LogSegment.find_batch_checked`)."""
    pos = 0
    while pos + BATCH_HEADER_SIZE <= length:
        base, size, magic, last = frame_at(buf, pos)
        if size < BATCH_HEADER_SIZE or pos + size > length or magic != MAGIC_V2:
            break
        if base < min_base_offset or last < base or last >= next_offset:
            break
        min_base_offset = last + 1
        pos += size
    return pos


def _first_crc_failure(buf: bytes, end: int) -> int | None:
    """Position of the first batch in ``buf[:end]`` (whole, framed batches) whose body
    fails its CRC, or None. CRC32C runs in hardware (about 40 µs a MiB here); the
    walk is one header read a batch."""
    pos = 0
    while pos < end:
        size = batch_size_at(buf, pos)
        if crc_at(buf, pos) != crc_of(buf, pos, pos + size):
            return pos
        pos += size
    return None


def _whole_batches_last_offset(buf: bytes | memoryview, length: int) -> int:
    """Last offset of the last whole batch in ``buf[:length]`` (-1 when none)."""
    pos = 0
    last = -1
    while pos + LOG_OVERHEAD <= length:
        size = batch_size_at(buf, pos)
        if size < LOG_OVERHEAD or pos + size > length:
            break
        last = frame_at(buf, pos)[3]
        pos += size
    return last


def _storage_error(exc: OSError, what: str) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {exc}")


class PartitionLog:
    """The segmented, durable log of one partition (see docs/design/log-api.md)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        directory: Path,
        config: LogConfig,
        *,
        clock: Clock,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        producer_state: ProducerStateManager | None = None,
        epoch_cache: LeaderEpochCache | None = None,
        unreadable: tuple[int, int] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.config = config
        self.leader_epoch = 0
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.producer_state = producer_state or ProducerStateManager()
        self._validator = LogValidator()
        self._validator_config: LogConfig | None = None
        # Leader epochs and their start offsets, kept in `leader-epoch-checkpoint`.
        self.epoch_cache = epoch_cache or LeaderEpochCache()
        # Set by replication (a follower, or a leader with followers); None: the log end.
        self._high_watermark: int | None = None
        # The first offset known lost to a corrupt batch (found at load or by a read)
        # and the base offset of the segment holding it.
        self._unreadable = unreadable
        self._epoch_checkpoint_lock = trio.Lock()
        self._epoch_checkpoint_dirty = False
        self.deleted = False
        self._clock = clock
        self._appended = trio.Event()
        self._flush_lock = trio.Lock()
        # Held from a batch's offsets to its bytes in the segment: a large batch is
        # written in a worker thread, and no other append or truncation may come between.
        self._append_lock = trio.Lock()
        self._unflushed_messages = 0
        self.last_flush_time = trio.current_time() if _in_trio() else 0.0
        # Called after log_start_offset moved, to persist the checkpoint.
        self.on_log_start_offset_change: Callable[[], Awaitable[None]] | None = None

    # ------------------------------------------------------------ creation / loading

    @classmethod
    def create(
        cls, topic: str, partition: int, directory: Path, config: LogConfig, *, clock: Clock
    ) -> PartitionLog:
        """Make the directory and an empty first segment (worker thread). OSError
        propagates; a half-created directory is harmless (reloaded as empty)."""
        directory.mkdir(parents=True, exist_ok=True)
        segment = _new_segment(directory, 0, config, clock())
        segment.open()
        return cls(
            topic,
            partition,
            directory,
            config,
            clock=clock,
            segments=[segment],
            log_start_offset=0,
            recovery_point=0,
        )

    @classmethod
    def load(
        cls,
        topic: str,
        partition: int,
        directory: Path,
        config: LogConfig,
        *,
        clock: Clock,
        clean: bool,
        recovery_point: int,
        log_start_offset: int,
    ) -> PartitionLog:
        """Open an existing partition directory, recovering what may be torn.

        After a clean shutdown every segment is loaded cheaply (indexes read and
        checked; a segment whose index does not fit is rebuilt). Otherwise every
        segment from the one holding the recovery point on is scanned and
        validated batch by batch; a torn or corrupt tail is truncated. Segments after a
        corrupt one are kept and recovered too (Kafka's LogLoader deletes them; they may
        hold acknowledged appends). An active segment that fails validation after a clean
        shutdown is served as it is, and new records go to a new segment. Producer
        state comes from the newest valid snapshot plus a header scan of the log
        after it. Runs in a worker thread; OSError propagates.
        """
        directory.mkdir(parents=True, exist_ok=True)
        for base in finish_interrupted_swaps(directory):
            logger.warning("%s: completed the cleaner's swap of segment %d", directory, base)
        bases: list[int] = []
        for entry in os.scandir(directory):
            name = entry.name
            if name.endswith(_LEFTOVER_SUFFIXES):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
                bases.append(int(name[: -len(LOG_SUFFIX)]))
        bases.sort()
        now = clock()
        if not bases:
            bases = [max(log_start_offset, 0)]
        segments: list[LogSegment] = []
        expected: int | None = None
        unreadable: tuple[int, int] | None = None
        for i, base in enumerate(bases):
            is_last = i == len(bases) - 1
            segment = _new_segment(directory, base, config, now)
            next_base = bases[i + 1] if not is_last else None
            unflushed = not clean and (next_base is None or next_base > recovery_point)
            if not unflushed:
                try:
                    segment.load_clean()
                except CorruptIndexError as exc:
                    logger.warning("%s: rebuilding indexes: %s", directory, exc)
                    unflushed = True
            truncated = 0
            if unflushed:
                truncated = segment.recover(expected)
                if truncated:
                    logger.warning(
                        "%s: truncated %d invalid bytes at offset %d",
                        segment.log_path,
                        truncated,
                        segment.next_offset,
                    )
            segments.append(segment)
            expected = segment.next_offset
            if truncated and next_base is not None:
                # Kafka's LogLoader deletes every later segment here. Those segments are
                # whole files of their own, each validated batch by batch below, and may
                # hold acknowledged records appended after a restart (issue 14): keep
                # them, recovered, and leave the corrupt range as a gap in the offsets.
                unreadable = unreadable or (expected, segment.base_offset)
                logger.error(
                    "%s: corrupt batch at offset %d; keeping the later segments from %d",
                    segment.log_path,
                    expected,
                    next_base,
                )
                clean = False
                recovery_point = -1
        active = segments[-1]
        if clean and active.size:
            corruption = active.find_corruption()
            if corruption is not None:
                position, offset = corruption
                unreadable = unreadable or (offset, active.base_offset)
                logger.error(
                    "%s: corrupt batch at position %d (offset %d) after a clean shutdown; "
                    "served as is (consumers see the CRC error), new records go to a new "
                    "segment from offset %d",
                    active.log_path,
                    position,
                    offset,
                    active.next_offset,
                )
                active.on_become_inactive()
                active.flush()
                segments.append(_new_segment(directory, active.next_offset, config, now))
                segments[-1].open()
                active = segments[-1]
        if active.first_batch_timestamp is not None:
            active.created_ms = min(now, active.first_batch_timestamp)
        log_end = active.next_offset
        start = min(max(log_start_offset, segments[0].base_offset), log_end)
        epoch_cache = _load_epoch_cache(directory, start, log_end)
        log = cls(
            topic,
            partition,
            directory,
            config,
            clock=clock,
            segments=segments,
            log_start_offset=start,
            recovery_point=log_end,
            epoch_cache=epoch_cache,
            unreadable=unreadable,
        )
        log._load_producer_state(clean)
        return log

    def _load_producer_state(self, clean: bool) -> None:
        log_end = self.log_end_offset
        snapshots = sorted(
            (int(p.name[: -len(SNAPSHOT_SUFFIX)]), p)
            for p in self.directory.glob("*" + SNAPSHOT_SUFFIX)
            if p.name[: -len(SNAPSHOT_SUFFIX)].isdigit()
        )
        state: ProducerStateManager | None = None
        from_offset = self.segments[0].base_offset
        for offset, path in reversed(snapshots):
            if offset > log_end:
                path.unlink(missing_ok=True)
                continue
            try:
                state = ProducerStateManager.from_bytes(path.read_bytes())
            except (OSError, ValueError) as exc:
                logger.warning("%s: ignoring snapshot: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            from_offset = max(offset, from_offset)
            break
        if state is None:
            state = ProducerStateManager()
        if from_offset < log_end:
            if clean:
                logger.info(
                    "%s: rebuilding producer state from offset %d", self.directory, from_offset
                )
            for segment in self.segments:
                if segment.next_offset <= from_offset:
                    continue
                found = segment.find_batch(from_offset)
                if found is None:
                    continue
                for position, header in segment.iter_headers(found[0]):
                    if header.producer_id < 0:
                        continue
                    if header.is_control:
                        self._replay_marker(state, segment, position, header)
                    else:
                        state.record(header, header.max_timestamp)
        state.evict_below(self.log_start_offset)
        self.producer_state = state

    def _replay_marker(
        self,
        state: ProducerStateManager,
        segment: LogSegment,
        position: int,
        header: RecordBatchHeader,
    ) -> None:
        """Recovery: close the transaction a marker ends, and put an aborted one back
        into the segment's `.txnindex` if the crash lost its entry."""
        try:
            batch = segment.read_bytes(position, header.size_in_bytes)
            kind = control_type(batch, header)
            coordinator_epoch = control_coordinator_epoch(batch, header)
        except Exception as exc:  # a recovered batch whose records do not decode
            logger.warning(
                "%s: unreadable control batch at %d: %s", segment.log_path, header.base_offset, exc
            )
            return
        if kind is None:
            return
        aborted = state.record_marker(
            header.producer_id,
            header.producer_epoch,
            header.base_offset,
            kind == CONTROL_COMMIT,
            header.base_offset + 1,
            coordinator_epoch,
        )
        if aborted is not None and not segment.txn_index.contains(
            aborted.producer_id, aborted.last_offset
        ):
            segment.txn_index.append(aborted)

    # ------------------------------------------------------------ offsets

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: below the first offset of the earliest open transaction,
        everything is decided (committed, aborted or not transactional)."""
        lso = self.producer_state.first_unstable_offset(self.log_end_offset)
        return max(min(lso, self.high_watermark), self.log_start_offset)

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction (DescribeProducers)."""
        return dict(self.producer_state.ongoing)

    def data_appended(self) -> trio.Event:
        """Set at the next append (or when the log's start moves or it is deleted);
        fetch long-polls wait on it. A fresh event replaces it each time."""
        return self._appended

    def _wake(self) -> None:
        event, self._appended = self._appended, trio.Event()
        event.set()

    # ------------------------------------------------------------ append

    async def append(
        self,
        batch: bytes | bytearray | memoryview,
        header: RecordBatchHeader,
        client: ClientAppend | None = None,
        *,
        log_append_time: bool = False,
    ) -> AppendResult:
        """Append one v2 batch as the leader (see docs/design/log-api.md).

        With ``client`` (a producer's batch, as Produce read its header), the topic's
        LogValidator runs once first, as UnifiedLog.append runs Kafka's LogValidator:
        InvalidRecordsError (CORRUPT_MESSAGE, INVALID_RECORD with the record's index,
        INVALID_TIMESTAMP, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
        UNSUPPORTED_COMPRESSION_TYPE) or whatever ``client.before_records`` raises;
        LogAppendTime then follows the topic's config. Without it the batch is one the
        broker trusts (already valid), with ``log_append_time`` as given.

        Raises KafkaError: OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH
        (idempotence), RECORD_LIST_TOO_LARGE (batch larger than segment.bytes),
        UNKNOWN_TOPIC_OR_PARTITION (deleted meanwhile), KAFKA_STORAGE_ERROR (a write
        or fsync failed; a failed write leaves the log as it was). If cancelled
        while the flush policy waits for the fsync, the batch stays appended.
        """
        on_loop = False
        if client is not None:
            batch = await self._validate(batch, header, client)
            log_append_time = self.config.log_append_time
            on_loop = client.write_on_loop
        async with self._appending():
            outcome = await self._append_locked(batch, header, log_append_time, on_loop)
        if isinstance(outcome, AppendResult):
            return outcome  # a duplicate
        stored, base_offset, append_time = outcome
        result = AppendResult(base_offset, stored.last_offset, append_time, self.log_start_offset)
        if self._unflushed_messages >= self.config.flush_messages:
            await self.flush(stored.last_offset + 1)
        return result

    async def _append_locked(
        self,
        batch: bytes | bytearray | memoryview,
        header: RecordBatchHeader,
        log_append_time: bool,
        on_loop: bool = False,
    ) -> AppendResult | tuple[RecordBatchHeader, int, int]:
        """`append` under the append lock: a duplicate's result, or the stored batch's
        header, base offset and append time; `on_loop`: see `_write`."""
        if self.deleted:
            raise self._deleted_error()
        size = header.size_in_bytes
        config = self.config
        if size > config.segment_bytes:
            raise KafkaError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"batch of {size} bytes is larger than segment.bytes {config.segment_bytes}",
            )
        if header.producer_id >= 0:
            duplicate = self.producer_state.check(header)
            if duplicate is not None:
                if self._unflushed_messages and self.config.flush_messages <= 1:
                    await self.flush(duplicate.last_offset + 1)
                return AppendResult(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.timestamp if log_append_time else -1,
                    self.log_start_offset,
                    duplicate=True,
                )
        base_offset = self.log_end_offset
        now = self._clock()
        append_time = now if log_append_time else -1
        view = memoryview(batch)[:size]
        if log_append_time:  # the CRC, which covers the timestamps, is rewritten: a copy
            data, rest = bytearray(view), view[size:]
        else:
            # Offsets and the leader epoch lie outside what the CRC covers: only the header
            # is copied to be assigned them, the records go from the request to the file.
            data, rest = bytearray(view[:BATCH_HEADER_SIZE]), view[BATCH_HEADER_SIZE:]
        stored = assign_offsets(
            data, header, base_offset, self.leader_epoch, now if log_append_time else None
        )
        active = self.active
        if not active.can_hold(stored, size, config.segment_bytes) or (
            active.size > 0 and now - active.rolling_timestamp > config.segment_ms
        ):
            active = self._roll(base_offset, now)
        await self._write(active, data, stored, rest, on_loop)
        self.producer_state.record(stored, stored.max_timestamp)
        self._note_leader_epoch(base_offset)
        self._unflushed_messages += stored.record_count
        self._wake()
        return stored, base_offset, append_time

    async def _write(
        self,
        active: LogSegment,
        data: bytes | bytearray | memoryview,
        stored: RecordBatchHeader,
        rest: bytes | bytearray | memoryview = b"",
        on_loop: bool = False,
    ) -> None:
        """One batch into the active segment, a large one from a worker thread (the
        append lock held: the segment's end moves only once it is written) unless
        `on_loop` (a quiet loop) and below QUIET_LOOP_WRITE_LIMIT."""
        size = len(data) + len(rest)
        try:
            if size < THREAD_WRITE_THRESHOLD or (on_loop and size < QUIET_LOOP_WRITE_LIMIT):
                active.append(data, stored, rest)
                return
            position = active.size
            active.acquire()
            try:
                await trio.to_thread.run_sync(active.write, data, rest)
            finally:
                active.release()
        except OSError as exc:
            raise _storage_error(exc, f"cannot append to {active.log_path}") from exc
        if self.deleted:  # the topic went while the thread wrote: its files are closed
            raise self._deleted_error()
        active.appended(stored, position, size)

    @contextlib.asynccontextmanager
    async def _appending(self) -> AsyncIterator[None]:
        """The append lock, taken without a checkpoint when free (the usual case)."""
        try:
            self._append_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._append_lock.acquire()
        try:
            yield
        finally:
            self._append_lock.release()

    async def _validate(
        self, batch: bytes | bytearray | memoryview, header: RecordBatchHeader, client: ClientAppend
    ) -> memoryview:
        """The LogValidator's one pass over a client's batch: batch checks and one walk
        of its records (in a worker thread when large, so that one producer does not
        stall every other connection for milliseconds), the request's checks, then the
        records' timestamps and keys. Returns the batch's exact bytes (a view, no copy)."""
        validator = self.validator()
        validator.check_header(header)
        if (
            header.record_count >= VALIDATION_IN_THREAD_FROM
            or header.size_in_bytes >= VALIDATION_IN_THREAD_BYTES
        ):
            try:
                validated = await trio.to_thread.run_sync(validator.check_batch, batch, header)
            except InvalidRecordsError as exc:
                # The worker's frames in its traceback view the batch, and Trio's keep the
                # traceback in a reference cycle: without them, the request's frame is
                # freed once answered instead of at the next garbage collection.
                raise exc.with_traceback(None) from None
        else:
            validated = validator.check_batch(batch, header)
        if client.before_records is not None:
            await client.before_records(header)
        validator.check_records(validated, self._clock())
        return validated.batch

    def validator(self) -> LogValidator:
        """The LogValidator of the topic's current config (kept until it changes)."""
        config = self.config
        if self._validator_config is not config:
            self._validator = LogValidator(
                max_batch_size=config.max_message_bytes,
                log_append_time=config.log_append_time,
                compacted=config.compact,
                timestamp_before_max_ms=config.timestamp_before_max_ms,
                timestamp_after_max_ms=config.timestamp_after_max_ms,
                topic=self.topic,
                partition=self.partition,
                segment_bytes=config.segment_bytes,
            )
            self._validator_config = config
        return self._validator

    async def append_control(
        self, producer_id: int, epoch: int, *, commit: bool, coordinator_epoch: int = 0
    ) -> int:
        """Write a COMMIT or ABORT marker for the producer's transaction (Kafka's
        WriteTxnMarkers on the leader); returns the marker's offset. An ABORT of an
        open transaction is recorded in the active segment's `.txnindex`.

        Raises KafkaError INVALID_PRODUCER_EPOCH for a marker older than the
        producer's epoch here, TRANSACTION_COORDINATOR_FENCED for one from an older
        coordinator epoch than its last marker's, UNKNOWN_TOPIC_OR_PARTITION when deleted,
        KAFKA_STORAGE_ERROR when a write fails.
        """
        if self.deleted:
            raise self._deleted_error()
        async with self._appending():
            self.producer_state.check_marker(producer_id, epoch, coordinator_epoch)
            data = bytearray(control_batch(producer_id, epoch, commit, coordinator_epoch))
            base_offset = self.log_end_offset
            now = self._clock()
            stored = assign_offsets(data, parse_header(data), base_offset, self.leader_epoch, None)
            active = self.active
            if not active.can_hold(stored, len(data), self.config.segment_bytes) or (
                active.size > 0 and now - active.rolling_timestamp > self.config.segment_ms
            ):
                active = self._roll(base_offset, now)
            try:
                active.append(data, stored)
            except OSError as exc:
                raise _storage_error(exc, f"cannot append to {active.log_path}") from exc
            aborted = self.producer_state.record_marker(
                producer_id, epoch, base_offset, commit, base_offset + 1, coordinator_epoch
            )
            if aborted is not None:
                try:
                    active.txn_index.append(aborted)
                except OSError as exc:
                    raise _storage_error(exc, f"cannot append to {active.txn_index.path}") from exc
            self._note_leader_epoch(base_offset)
            self._unflushed_messages += 1
        self._wake()
        if self._unflushed_messages >= self.config.flush_messages:
            await self.flush(base_offset + 1)
        return base_offset

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound: int
    ) -> tuple[AbortedTxn, ...]:
        """Aborted transactions overlapping [start_offset, upper_bound), from the
        `.txnindex` of the segment holding ``start_offset`` and every later one (an
        abort marker lies after its transaction's records)."""
        index = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
        return merge_unique(
            entry
            for segment in self.segments[index:]
            for entry in segment.txn_index.collect(start_offset, upper_bound)
        )

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        """Start a new active segment at ``base_offset`` (event loop: creating two
        empty files and a small snapshot). The producer snapshot is written without
        fsync: after a power loss an older snapshot plus a log scan replace it."""
        old = self.active
        old.on_become_inactive()
        segment = _new_segment(self.directory, base_offset, self.config, now)
        try:
            segment.open()
            self._write_snapshot(base_offset, durable=False)
        except OSError as exc:
            segment.close()
            raise _storage_error(exc, f"cannot roll {self.directory}") from exc
        self.segments.append(segment)
        self._bases.append(base_offset)
        return segment

    def _write_snapshot(self, offset: int, *, durable: bool) -> None:
        atomic_write(
            self.directory / snapshot_file_name(offset),
            self.producer_state.to_bytes(),
            durable=durable,
        )
        self._prune_snapshots()

    def _prune_snapshots(self) -> None:
        snapshots = sorted(
            (int(p.name[: -len(SNAPSHOT_SUFFIX)]), p)
            for p in self.directory.glob("*" + SNAPSHOT_SUFFIX)
            if p.name[: -len(SNAPSHOT_SUFFIX)].isdigit()
        )
        for _, path in snapshots[:-_KEEP_SNAPSHOTS]:
            path.unlink(missing_ok=True)

    # ------------------------------------------------------------ flush

    async def flush(self, to_offset: int | None = None) -> None:
        """fsync every segment that may hold data below ``to_offset`` (default: the
        log end) in a worker thread, then advance the recovery point.

        Raises KafkaError KAFKA_STORAGE_ERROR when an fsync fails. Not cancellable
        once the thread runs (the fsync completes either way).
        """
        target = self.log_end_offset if to_offset is None else to_offset
        if self.recovery_point >= target:
            return
        async with self._flush_lock:
            if self.recovery_point >= target or self.deleted:
                return
            if self._epoch_checkpoint_dirty:
                await self._write_epoch_checkpoint()
            end = self.log_end_offset
            point = self.recovery_point
            segments = [s for s in self.segments if s.next_offset > point or s is self.active]
            self._unflushed_messages = 0
            for segment in segments:
                segment.acquire()
            try:
                await trio.to_thread.run_sync(_flush_segments, segments)
            except OSError as exc:
                raise _storage_error(exc, f"cannot flush {self.directory}") from exc
            finally:
                for segment in segments:
                    segment.release()
            self.recovery_point = max(self.recovery_point, end)
            self.last_flush_time = trio.current_time()

    @property
    def has_unflushed_data(self) -> bool:
        return self.recovery_point < self.log_end_offset

    # ------------------------------------------------------------ read

    async def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool = True,
        read_committed: bool = False,
        follower: bool = False,
    ) -> ReadResult:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``;
        with ``read_committed`` only below the last stable offset, with the aborted
        transactions of the range read (Kafka's read with FetchTxnCommitted); a
        consumer reads below the high watermark, a ``follower`` up to the log end.

        Raises KafkaError OFFSET_OUT_OF_RANGE outside [log start, log end],
        KAFKA_STORAGE_ERROR when the read fails.
        """
        log_end = self.log_end_offset
        start = self.log_start_offset
        lso = self.last_stable_offset
        if offset < start or offset > log_end:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is out of range for {self.topic}-{self.partition}: "
                f"[{start}, {log_end}]",
            )
        upper = lso if read_committed else log_end if follower else self.high_watermark
        high_watermark = self.high_watermark
        empty = ReadResult(b"", high_watermark, start, lso, () if read_committed else None)
        if offset >= upper or self.deleted:
            return empty
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        try:
            for segment in self.segments[index:]:
                found = segment.find_batch_checked(offset)
                if found is not None:
                    break
            else:
                return empty
            position, first = found
            first_size = first.size_in_bytes
            end_position = segment.size
            if upper < segment.next_offset:
                bound = segment.find_batch(upper)
                if bound is not None:
                    end_position = bound[0]
            if end_position <= position:
                return empty
            if first_size > max_bytes:
                if not min_one_batch:
                    return empty
                length = first_size
            else:
                length = min(max_bytes, end_position - position)
            # pread's own bytes, not a bytearray read into: that one is zero-filled first,
            # a pass over every byte served (a follower's fetch reads each batch once).
            if length > THREAD_READ_THRESHOLD and not (
                length <= CACHED_READ_ON_LOOP_LIMIT and segment.in_page_cache(position, length)
            ):
                segment.acquire()
                try:
                    buf = await trio.to_thread.run_sync(segment.read_bytes, position, length)
                finally:
                    segment.release()
            else:
                buf = segment.read_bytes(position, length)
            read = len(buf)
        except OSError as exc:
            raise _storage_error(exc, f"cannot read {self.topic}-{self.partition}") from exc
        except CorruptBatchError as exc:
            await self._note_unreadable(segment, offset)
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"{self.topic}-{self.partition}: {exc}; offsets {offset} to "
                f"{exc.next_readable - 1} cannot be read (next readable: {exc.next_readable})",
            ) from None
        end = _whole_batches_end(buf, read, first.base_offset, segment.next_offset)
        if self._high_watermark is not None:
            # Replicated: a body damaged on disk is repaired from an in-sync replica
            # (docs/corrupt-data.md), so the leader checks what it serves; the batches
            # before the damaged one are served, a read starting at it is refused.
            damaged = _first_crc_failure(buf, end)
            if damaged == 0:
                await self._note_unreadable(segment, offset)
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"{self.topic}-{self.partition}: corrupt batch at position {position} "
                    f"of {segment.log_path}: its records fail their CRC; offsets {offset} "
                    f"to {first.last_offset} cannot be read "
                    f"(next readable: {first.last_offset + 1})",
                )
            if damaged is not None:
                end = damaged
        aborted = None
        if read_committed:
            last = _whole_batches_last_offset(buf, end)
            aborted = self.collect_aborted_transactions(offset, min(last + 1, upper))
        return ReadResult(memoryview(buf)[:end], high_watermark, start, lso, aborted)

    async def _note_unreadable(self, segment: LogSegment, offset: int) -> None:
        """A read of ``offset`` met a corrupt batch in ``segment``: remember where the
        loss starts, the end of the last batch before it that passes framing and CRC
        (one scan of the segment in a worker thread, once per corruption), so that a
        follower cut there continues exactly where the leader's copy is needed. The
        segment's start when the scan finds nothing before ``offset``."""
        known = self.unreadable_from
        if known is not None and known <= offset:
            return
        segment.acquire()
        try:
            found = await trio.to_thread.run_sync(segment.find_corruption)
        except OSError:
            found = None
        finally:
            segment.release()
        first = found[1] if found is not None and found[1] <= offset else segment.base_offset
        if known is None or first < known:
            self._unreadable = (first, segment.base_offset)

    # ------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) with timestamp >= ``timestamp_ms`` (ListOffsets),
        through each segment's time index. Reads a few KB on the event loop.
        Raises KafkaError KAFKA_STORAGE_ERROR when the read fails."""
        try:
            for segment in list(self.segments):
                if (
                    segment.max_timestamp < timestamp_ms
                    or segment.next_offset <= self.log_start_offset
                ):
                    continue
                found = segment.find_offset_for_timestamp(timestamp_ms, self.log_start_offset)
                if found is not None:
                    return found
        except OSError as exc:
            raise _storage_error(exc, "cannot search the time index") from exc
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp (the first
        such record), or (-1, -1) for an empty log."""
        best: LogSegment | None = None
        for segment in self.segments:
            if segment.next_offset <= self.log_start_offset or segment.size == 0:
                continue
            if best is None or segment.max_timestamp > best.max_timestamp:
                best = segment
        if best is None or best.max_timestamp < 0:
            return (-1, -1)
        found = best.find_batch(best.offset_of_max_timestamp)
        if found is not None:
            position, header = found
            data = best.read_bytes(position, header.size_in_bytes)
            for record in iter_records(data, header):
                if record.timestamp == best.max_timestamp:
                    return (record.offset, record.timestamp)
        return (best.offset_of_max_timestamp, best.max_timestamp)

    # ------------------------------------------------------------ log start / retention

    async def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (-1: the high watermark),
        drop segments wholly below it, persist the new start. Returns the new low
        watermark. Raises KafkaError OFFSET_OUT_OF_RANGE past the log end."""
        log_end = self.log_end_offset
        if offset == -1:
            offset = log_end
        if offset < 0 or offset > log_end:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records of {self.topic}-{self.partition} before {offset}: "
                f"the log ends at {log_end}",
            )
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        self.producer_state.evict_below(offset)
        doomed = []
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            doomed.append(self._pop_oldest())
        await self._finish_deletion(doomed)
        return self.log_start_offset

    async def apply_retention(self, now_ms: int) -> int:
        """Delete old inactive segments by log start, retention.bytes and
        retention.ms (Kafka's order); never the active segment. Returns how many
        segments were deleted."""
        config = self.config
        doomed: list[LogSegment] = []
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            doomed.append(self._pop_oldest())
        if config.delete_enabled and config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes
            while len(self.segments) > 1 and excess - self.segments[0].size >= 0:
                excess -= self.segments[0].size
                doomed.append(self._pop_oldest())
        if config.delete_enabled and config.retention_ms >= 0:
            while len(self.segments) > 1:
                oldest = self.segments[0]
                newest = oldest.max_timestamp if oldest.max_timestamp >= 0 else oldest.created_ms
                if now_ms - newest <= config.retention_ms:
                    break
                doomed.append(self._pop_oldest())
        if doomed:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.producer_state.evict_below(self.log_start_offset)
            await self._finish_deletion(doomed)
        return len(doomed)

    def _pop_oldest(self) -> LogSegment:
        segment = self.segments.pop(0)
        self._bases.pop(0)
        segment.mark_deleted()
        return segment

    async def _finish_deletion(self, doomed: list[LogSegment]) -> None:
        self._wake()
        if doomed:
            logger.info(
                "%s-%d: deleting %d segment(s); log start offset %d",
                self.topic,
                self.partition,
                len(doomed),
                self.log_start_offset,
            )
            await trio.to_thread.run_sync(_unlink_segments, doomed)
            with contextlib.suppress(OSError):
                self._prune_snapshots()
        if self.on_log_start_offset_change is not None:
            await self.on_log_start_offset_change()

    # ------------------------------------------------------------ replication

    @property
    def high_watermark(self) -> int:
        """The offset below which every in-sync replica holds the records. Without
        replication (one replica) that is the log end, as before."""
        return self.log_end_offset if self._high_watermark is None else self._high_watermark

    @property
    def unreadable_from(self) -> int | None:
        """The first offset lost to a corrupt batch, as far as the log knows: one a read
        met, one left in the active segment after a clean shutdown, or the start of the
        gap recovery left (docs/corrupt-data.md); None when none is known. Replication
        repairs from it (a follower truncates there and fetches the rest); the log
        forgets it once truncation or retention removed it."""
        if self._unreadable is None or self._unreadable[0] < self.log_start_offset:
            return None
        return self._unreadable[0]

    @property
    def replicated_high_watermark(self) -> int | None:
        """The high watermark replication set (persisted in the log dir's
        replication-offset-checkpoint), None while it never did."""
        return self._high_watermark

    def update_high_watermark(self, high_watermark: int) -> None:
        """Set by replication: on a follower the leader's, on a leader the smallest log
        end of its ISR; kept within [log start, log end] (Kafka's updateHighWatermark).
        A rise wakes the fetch long-polls: consumers read only below it."""
        before = self.high_watermark
        self._high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        if self._high_watermark > before:
            self._wake()

    async def append_as_follower(
        self,
        records: bytes | bytearray | memoryview,
        *,
        checked: Sequence[tuple[RecordBatchHeader, memoryview]] | None = None,
    ) -> None:
        """Append a leader's whole batches as they are (Kafka's appendAsFollower):
        their offsets, partition leader epochs and timestamps are kept, never assigned.
        Each batch is checked (framing, CRC, codec, counts) and must start past the log
        end and past the previous batch; gaps between batches are allowed, since a
        compacted leader log has them. Producer state learns the batches without
        sequence checks (the leader made them), markers close transactions (an abort
        goes into the `.txnindex`), and each new epoch's first offset goes into the
        epoch cache and its checkpoint.

        Raises KafkaError CORRUPT_MESSAGE (a bad batch, or offsets that overlap the log
        or go back; nothing is appended then), RECORD_LIST_TOO_LARGE,
        UNKNOWN_TOPIC_OR_PARTITION (deleted), KAFKA_STORAGE_ERROR.

        `checked`: the batches of `records` with their headers, already checked as
        `iter_batches` checks them (the replica fetcher's `fetched_batches` did), so
        that a fetched batch's CRC is computed once on the follower, as in Kafka.
        """
        if self.deleted:
            raise self._deleted_error()
        name = f"{self.topic}-{self.partition}"
        if checked is not None:
            batches = list(checked)
        else:
            try:
                batches = list(iter_batches(records, verify_crc=True))
            except InvalidRecordsError as exc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{name}: {exc}") from None
        expected = self.log_end_offset
        for header, _ in batches:
            if header.base_offset < expected:
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"{name}: a batch at offsets {header.base_offset} to {header.last_offset} "
                    f"does not follow offset {expected - 1}",
                )
            if header.size_in_bytes > self.config.segment_bytes:
                raise KafkaError(
                    ErrorCode.RECORD_LIST_TOO_LARGE,
                    f"batch of {header.size_in_bytes} bytes is larger than segment.bytes "
                    f"{self.config.segment_bytes}",
                )
            expected = header.last_offset + 1
        async with self._appending():
            epochs_changed = False
            for header, data in batches:
                now = self._clock()
                active = self.active
                if not active.can_hold(header, header.size_in_bytes, self.config.segment_bytes) or (
                    active.size > 0 and now - active.rolling_timestamp > self.config.segment_ms
                ):
                    active = self._roll(header.base_offset, now)
                try:
                    position = active.append(data, header)
                except OSError as exc:
                    raise _storage_error(exc, f"cannot append to {active.log_path}") from exc
                if header.producer_id >= 0:
                    if header.is_control:
                        self._replay_marker(self.producer_state, active, position, header)
                    else:
                        self.producer_state.record(header, header.max_timestamp)
                if header.partition_leader_epoch >= 0:
                    epochs_changed |= self.epoch_cache.assign(
                        header.partition_leader_epoch, header.base_offset
                    )
                self._unflushed_messages += header.record_count
        if not batches:
            return
        self._wake()
        if epochs_changed:
            await self._write_epoch_checkpoint()
        if self._unflushed_messages >= self.config.flush_messages:
            await self.flush()

    async def truncate_to(self, offset: int) -> None:
        """Drop every record at ``offset`` and later (KIP-101; Kafka's truncateTo): later
        segments deleted, the segment holding ``offset`` cut with its three indexes (a
        batch holding ``offset`` goes whole, so the log may end before it), producer
        state rebuilt from a snapshot and the log, the epoch cache truncated from the
        end, the high watermark clamped. Below the log start nothing is shared: the log
        starts over at ``offset``. At or past the log end nothing happens.
        Crash-safe step by step (broker/log/log_truncation.py). Raises KafkaError
        KAFKA_STORAGE_ERROR."""
        if offset < 0:
            raise ValueError(f"cannot truncate to offset {offset}")
        known = self._unreadable if self.unreadable_from is not None else None
        repair = known is not None and offset >= known[0]
        if offset >= self.log_end_offset and not repair:
            return
        if offset < self.log_start_offset:
            await self.truncate_fully_and_start_at(offset)
            return
        async with self._append_lock, self._flush_lock:
            index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            if known is not None and repair:
                # The segment holding the corrupt batch, whatever end its damage implied.
                index = min(index, max(bisect.bisect_right(self._bases, known[1]) - 1, 0))
            kept = self.segments[index]
            doomed = self.segments[index + 1 :]
            del self.segments[index + 1 :]
            del self._bases[index + 1 :]
            for segment in doomed:
                segment.mark_deleted()
            steps = truncation_steps(self.directory, kept, doomed, offset, corrupt=repair)

            def run_steps() -> None:
                for step in steps:
                    step()
                self._load_producer_state(clean=False)

            kept.acquire()
            try:
                await trio.to_thread.run_sync(run_steps)
            except OSError as exc:
                raise _storage_error(exc, f"cannot truncate {self.directory}") from exc
            finally:
                kept.release()
            end = self.log_end_offset
            self.recovery_point = min(self.recovery_point, end)
            if self._high_watermark is not None:
                self._high_watermark = min(self._high_watermark, end)
            if repair or (known is not None and known[0] >= end):
                self._unreadable = None  # the corrupt batch went with the cut
            if self.epoch_cache.truncate_from_end(end):
                await self._write_epoch_checkpoint()
        logger.info("%s-%d: truncated to offset %d", self.topic, self.partition, end)
        self._wake()

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Replace the whole log by an empty one starting at ``offset`` (a follower
        whose log the leader's no longer overlaps): segments deleted newest first, then
        an empty segment at ``offset``; producer state and epoch cache emptied; log
        start, recovery point and high watermark at ``offset``. A crash midway leaves a
        prefix of the old log (or an empty one), which the follower truncates again.
        Raises KafkaError KAFKA_STORAGE_ERROR."""
        if offset < 0:
            raise ValueError(f"cannot start the log at offset {offset}")
        async with self._append_lock, self._flush_lock:
            doomed = list(self.segments)
            for segment in doomed:
                segment.mark_deleted()
            now = self._clock()

            def replace() -> LogSegment:
                delete_snapshots_after(self.directory, -1)
                unlink_newest_first(doomed)
                segment = _new_segment(self.directory, offset, self.config, now)
                segment.open()
                return segment

            try:
                fresh = await trio.to_thread.run_sync(replace)
            except OSError as exc:
                raise _storage_error(exc, f"cannot truncate {self.directory}") from exc
            self.segments = [fresh]
            self._bases = [offset]
            self.log_start_offset = offset
            self.recovery_point = offset
            self.producer_state = ProducerStateManager()
            self.epoch_cache = LeaderEpochCache()
            self._unreadable = None
            if self._high_watermark is not None:
                self._high_watermark = offset
            await self._write_epoch_checkpoint()
        logger.info("%s-%d: truncated fully, starting at %d", self.topic, self.partition, offset)
        self._wake()
        if self.on_log_start_offset_change is not None:
            await self.on_log_start_offset_change()

    async def become_leader(self, leader_epoch: int) -> None:
        """LeaderAndIsr made this replica leader at ``leader_epoch``: appends are stamped
        with it, and the epoch starts at the log end in the cache at once (Kafka's
        Partition.makeLeader), so OffsetsForLeaderEpoch knows it before the first append.
        Raises KafkaError KAFKA_STORAGE_ERROR.

        The high watermark it had as follower stays (Kafka's makeLeader): records past it
        may not be on every in-sync replica, so consumers see them only once the new
        leader's ISR holds them and moves it."""
        self.leader_epoch = leader_epoch
        if self.epoch_cache.assign(leader_epoch, self.log_end_offset):
            await self._write_epoch_checkpoint()

    def _note_leader_epoch(self, base_offset: int) -> None:
        """A leader's append: the first batch of an epoch the cache lacks starts it there.
        The checkpoint is written with the next flush (or close), so the append path
        gains no fsync; `become_leader` writes it at once, before any such append."""
        if self.epoch_cache.assign(self.leader_epoch, base_offset):
            self._epoch_checkpoint_dirty = True

    @property
    def epoch_checkpoint_path(self) -> Path:
        return self.directory / LEADER_EPOCH_CHECKPOINT_FILENAME

    async def _write_epoch_checkpoint(self) -> None:
        async with self._epoch_checkpoint_lock:
            self._epoch_checkpoint_dirty = False
            entries = self.epoch_cache.entries
            try:
                await trio.to_thread.run_sync(write_checkpoint, self.epoch_checkpoint_path, entries)
            except OSError as exc:
                raise _storage_error(exc, f"cannot write {self.epoch_checkpoint_path}") from exc

    # ------------------------------------------------------------ compaction

    def install_cleaned(self, cleaned: Sequence[tuple[int, bool]]) -> list[LogSegment]:
        """Put the log cleaner's committed replacements in place (event loop, no await:
        renames and a small index read per segment, so no read or retention sees a
        half-swapped list). ``cleaned`` is (base offset, replaced) per segment: replaced
        segments swap in their `.swap` files (broker/log/segment_swap.py), the others
        had nothing left and are dropped (unless it is now the first segment). Segments
        that retention or DeleteRecords removed meanwhile are skipped (their replacement
        discarded). Returns the dropped
        segments, whose files the caller unlinks in a worker thread. Raises OSError
        (the log then keeps the segments it had; a later load completes the swap)."""
        by_base = {segment.base_offset: segment for segment in self.segments[:-1]}
        dropped: list[LogSegment] = []
        for base, replaced in cleaned:
            old = by_base.get(base)
            if old is None or self.deleted:
                discard_cleaned(self.directory, base)
                continue
            index = self.segments.index(old)
            if not replaced and index == 0:
                # Retention made it the first segment during the pass: it holds the log
                # start (a load starts the log at the first segment), so it stays as it
                # is and the next pass replaces it with an empty segment.
                continue
            if not replaced:
                del self.segments[index]
                del self._bases[index]
                old.mark_deleted()
                dropped.append(old)
                continue
            replace_with_swap(self.directory, base)
            new = _new_segment(self.directory, base, self.config, old.created_ms)
            try:
                new.load_clean()
            except CorruptIndexError:
                new.close()
                new.recover(None)
            self.segments[index] = new
            old.mark_deleted()
        self._wake()
        return dropped

    # ------------------------------------------------------------ shutdown / deletion

    def close(self, *, clean: bool) -> None:
        """Make the files consistent and close them (worker thread, at shutdown):
        final time-index entry, durable producer snapshot, fsync. OSError
        propagates after the descriptors are closed."""
        try:
            if clean and not self.deleted:
                if self._epoch_checkpoint_dirty:
                    write_checkpoint(self.epoch_checkpoint_path, self.epoch_cache.entries)
                self.active.on_become_inactive()
                self._write_snapshot(self.log_end_offset, durable=True)
                _flush_segments(
                    [
                        s
                        for s in self.segments
                        if s.next_offset > self.recovery_point or s is self.active
                    ]
                )
                self.recovery_point = self.log_end_offset
        finally:
            for segment in self.segments:
                segment.close()

    def _deleted_error(self) -> KafkaError:
        return KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{self.topic}-{self.partition} was deleted"
        )

    def mark_deleted(self) -> None:
        """The topic is being deleted: refuse appends, wake fetchers, release files."""
        self.deleted = True
        for segment in self.segments:
            segment.mark_deleted()
        self._wake()

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, [{self.log_start_offset}, {self.log_end_offset}))"


def _new_segment(directory: Path, base: int, config: LogConfig, now: int) -> LogSegment:
    return LogSegment(
        directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        created_ms=now,
        max_index_entries=max(config.segment_index_bytes // 12, 1),
    )


def _load_epoch_cache(directory: Path, log_start: int, log_end: int) -> LeaderEpochCache:
    """The partition's leader-epoch-checkpoint, cut to the log as loaded (a crash may
    have left epochs past a truncated end, or before a moved start, as Kafka's
    LogLoader allows for). An unreadable file is logged and starts an empty cache:
    OffsetsForLeaderEpoch then answers "unknown" until the next epoch starts."""
    path = directory / LEADER_EPOCH_CHECKPOINT_FILENAME
    try:
        cache = LeaderEpochCache(read_checkpoint(path))
    except MalformedCheckpoint as exc:
        logger.warning("%s; starting with no leader epochs", exc)
        cache = LeaderEpochCache()
    cache.truncate_from_end(log_end)
    cache.truncate_from_start(log_start)
    return cache


def _flush_segments(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.flush()


def _unlink_segments(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.unlink_files()


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
