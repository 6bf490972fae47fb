"""Kafka's LogCleaner and LogCleanerManager: which compacted partition to clean next,
and the cleaner tasks that clean it without stalling the request path.

Each of `log.cleaner.threads` Trio tasks takes the filthiest cleanable partition
(highest dirty ratio at or above `min.cleanable.dirty.ratio`, or any whose dirty data
is older than `max.compaction.lag.ms`), runs the pass (broker/log/cleaner_pass.py: all
reading, filtering, writing and fsyncing) in a child process, or a worker thread with
`log.cleaner.worker=thread` (broker/log/cleaner_worker.py says why not by default), then
installs the result on the event loop in one step with no await. A task with nothing
to clean sleeps `log.cleaner.backoff.ms`.

What is cleanable (LogCleanerManager.cleanableOffsets): segments below the first
uncleanable offset, which is the smallest of the active segment's base (never
cleaned), the last stable offset (open transactions are not yet decided) and the base
of the first segment newer than `min.compaction.lag.ms`. The first dirty offset (where
the last pass stopped) is checkpointed in `cleaner-offset-checkpoint` in each log dir,
Kafka's file; a missing checkpoint only costs a pass over clean data.

A segment that fails its CRC or does not decode marks the partition uncleanable
until the broker restarts (Kafka's uncleanable partitions): logged once, counted in
`uncleanable-partitions-count`, the rest of the broker unaffected.
"""

from __future__ import annotations

import functools
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import trio

from broker.config import BrokerConfig
from broker.log._files import fsync_dir, read_offset_checkpoint, write_offset_checkpoint
from broker.log.cleaner_messages import EXIT_CORRUPT, outcome_from_json, plan_to_json
from broker.log.cleaner_pass import (
    CorruptSegmentError,
    FaultHook,
    PassAborted,
    PassOutcome,
    PassPlan,
    SegmentSource,
    Throttler,
    run_pass,
)
from broker.log.log_segment import LogSegment
from broker.log.partition_log import PartitionLog
from broker.log.segment_swap import discard_cleaned
from broker.metrics import MetricSample

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_MAP_ENTRY_BYTES = 24
_LONG_MAX = 2**63 - 1

PartitionKey = tuple[str, int]
LogSource = Callable[[], Iterator[PartitionLog]]


@attrs.frozen
class CleanerSettings:
    threads: int
    io_max_bytes_per_second: float
    backoff_ms: int
    dedupe_buffer_size: int
    worker: str = "process"  # or "thread" (broker/log/cleaner_worker.py says why)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> CleanerSettings:
        return cls(
            threads=config.cleaner.threads,
            io_max_bytes_per_second=config.cleaner.io_max_bytes_per_second,
            backoff_ms=config.cleaner.backoff_ms,
            dedupe_buffer_size=config.cleaner.dedupe_buffer_size,
            worker=config.cleaner.worker,
        )


@attrs.frozen
class CleanableRange:
    """A partition's cleaner view now (also what `topics describe` shows)."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    segments: tuple[LogSegment, ...]
    must_clean: bool  # dirty data older than max.compaction.lag.ms

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@attrs.define
class PartitionCleanerState:
    last_cleaned_ms: int = -1
    last_outcome: PassOutcome | None = None


def cleanable_range(log: PartitionLog, first_dirty: int, now_ms: int) -> CleanableRange:
    """Kafka's LogCleanerManager.cleanableOffsets and dirty ratio (segment granular)."""
    config = log.config
    first_dirty = first_dirty if log.log_start_offset <= first_dirty else log.log_start_offset
    if first_dirty > log.log_end_offset:
        first_dirty = log.log_start_offset
    uncleanable = min(log.active.base_offset, log.last_stable_offset)
    if config.min_compaction_lag_ms > 0:
        for segment in log.segments:
            if segment.max_timestamp > now_ms - config.min_compaction_lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    segments = []
    for segment, following in zip(log.segments, log.segments[1:], strict=False):
        if following.base_offset > uncleanable:
            break
        segments.append(segment)
    clean = sum(s.size for s in segments if s.next_offset <= first_dirty)
    dirty_segments = [s for s in segments if s.next_offset > first_dirty]
    dirty = sum(s.size for s in dirty_segments)
    must = False
    if dirty_segments and config.max_compaction_lag_ms < _LONG_MAX:
        first_ts = dirty_segments[0].first_batch_timestamp
        must = first_ts is not None and now_ms - first_ts > config.max_compaction_lag_ms
    return CleanableRange(first_dirty, uncleanable, clean, dirty, tuple(segments), must)


class LogCleaner:
    """A Service (started after the LogManager, cancelled before it)."""

    def __init__(
        self,
        settings: CleanerSettings,
        logs: LogSource,
        *,
        clock: Callable[[], int],
        fault: FaultHook | None = None,
        checkpoint_file: Callable[[], str] = lambda: CLEANER_CHECKPOINT_FILE,
    ) -> None:
        # checkpoint_file: a process of a cluster names its own (broker/cluster/).
        self.settings = settings
        self._checkpoint_file = checkpoint_file
        self._logs = logs
        self._clock = clock
        self._fault = fault
        self._first_dirty: dict[Path, dict[PartitionKey, int]] = {}
        self._in_progress: set[PartitionKey] = set()
        self.uncleanable: set[PartitionKey] = set()
        self.states: dict[PartitionKey, PartitionCleanerState] = {}
        self._stop = threading.Event()
        self._checkpoint_lock = trio.Lock()
        self.dead_threads = 0
        self.last_run_ms = -1
        self.max_clean_time_s = 0.0
        self.max_buffer_utilization = 0.0
        self.last_recopy_ratio = 0.0
        self.max_compaction_delay_s = 0.0

    # ------------------------------------------------------------ service

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._stop_passes_on_cancel)
            for i in range(self.settings.threads):
                nursery.start_soon(self._cleaner_task, i)
            task_status.started()

    async def _stop_passes_on_cancel(self) -> None:
        """A pass in its thread is not abandoned on cancel (it reads descriptors the
        log closes at shutdown): the stop flag makes it end at its next batch."""
        try:
            await trio.sleep_forever()
        finally:
            self._stop.set()

    async def _cleaner_task(self, index: int) -> None:
        backoff = self.settings.backoff_ms / 1000
        try:
            while True:
                if not await self.clean_filthiest():
                    await trio.sleep(backoff)
        except BaseException as exc:
            if not isinstance(exc, trio.Cancelled):
                self.dead_threads += 1
                logger.exception("log cleaner %d died", index)
            raise

    # ------------------------------------------------------------ choosing

    def first_dirty_offset(self, log: PartitionLog) -> int:
        checkpoint = self._checkpoint(log.directory.parent)
        return checkpoint.get((log.topic, log.partition), log.log_start_offset)

    def _checkpoint(self, log_dir: Path) -> dict[PartitionKey, int]:
        if log_dir not in self._first_dirty:
            path = log_dir / self._checkpoint_file()
            self._first_dirty[log_dir] = read_offset_checkpoint(path)
        return self._first_dirty[log_dir]

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's first dirty offsets must not apply to a new topic of the
        same name (written out with the next checkpoint)."""
        for checkpoint in self._first_dirty.values():
            for key in [k for k in checkpoint if k[0] == topic]:
                del checkpoint[key]
        self.uncleanable = {k for k in self.uncleanable if k[0] != topic}
        for key in [k for k in self.states if k[0] == topic]:
            del self.states[key]

    def describe(self, log: PartitionLog) -> CleanableRange:
        return cleanable_range(log, self.first_dirty_offset(log), self._clock())

    def grab_filthiest(self) -> tuple[PartitionLog, CleanableRange] | None:
        """The compacted partition most in need of cleaning (LogCleanerManager
        .grabFilthiestCompactedLog), marked in progress; None when none is due."""
        now = self._clock()
        best: tuple[PartitionLog, CleanableRange] | None = None
        self.max_compaction_delay_s = 0.0
        for log in self._logs():
            key = (log.topic, log.partition)
            if (
                not log.config.compact
                or log.deleted
                or key in self._in_progress
                or key in self.uncleanable
            ):
                continue
            found = self.describe(log)
            if found.must_clean:
                delay = now - (found.segments[0].first_batch_timestamp or now)
                self.max_compaction_delay_s = max(self.max_compaction_delay_s, delay / 1000)
            due = found.dirty_bytes > 0 and (
                found.must_clean or found.dirty_ratio >= log.config.min_cleanable_dirty_ratio
            )
            if due and (best is None or found.dirty_ratio > best[1].dirty_ratio):
                best = (log, found)
        if best is not None:
            self._in_progress.add((best[0].topic, best[0].partition))
        return best

    # ------------------------------------------------------------ cleaning

    async def clean_filthiest(self) -> bool:
        """Clean the filthiest partition if one is due; False when none is."""
        chosen = self.grab_filthiest()
        if chosen is None:
            return False
        log, found = chosen
        try:
            await self.clean(log, found)
        finally:
            self._in_progress.discard((log.topic, log.partition))
        return True

    async def clean(self, log: PartitionLog, found: CleanableRange) -> PassOutcome | None:
        """One pass over ``log``: a worker process or thread for the work, the event
        loop for the swap."""
        key = (log.topic, log.partition)
        now = self._clock()
        config = log.config
        plan = PassPlan(
            segments=tuple(SegmentSource.of(segment) for segment in found.segments),
            first_dirty_offset=found.first_dirty_offset,
            aborted=log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset),
            last_batch_of_producer={
                entry.producer_id: entry.last_offset for entry in log.producer_state.entries()
            },
            now_ms=now,
            delete_retention_ms=config.delete_retention_ms,
            max_map_entries=max(self.settings.dedupe_buffer_size // _MAP_ENTRY_BYTES, 1),
            index_interval_bytes=config.index_interval_bytes,
            max_index_entries=max(config.segment_index_bytes // 12, 1),
        )
        rate = self.settings.io_max_bytes_per_second / max(self.settings.threads, 1)
        started = time.monotonic()
        try:
            outcome = await self._run_pass(plan, rate)
        except CorruptSegmentError as exc:
            self.uncleanable.add(key)
            logger.error("%s-%d: not cleaned until restart: %s", log.topic, log.partition, exc)
            return None
        except PassAborted:
            return None
        except OSError as exc:
            if not log.deleted:  # a deleted topic's directory vanishes under the pass
                logger.warning("%s-%d: cleaning failed: %s", log.topic, log.partition, exc)
            return None
        except Exception:
            self.uncleanable.add(key)
            logger.exception("%s-%d: not cleaned until restart", log.topic, log.partition)
            return None
        try:
            dropped = log.install_cleaned([(c.base_offset, c.replaced) for c in outcome.cleaned])
            # What describe shows changes with the segments, before any await.
            self._checkpoint(log.directory.parent)[key] = outcome.end_offset
            self.last_run_ms = self._clock()
            self.states[key] = PartitionCleanerState(self.last_run_ms, outcome)
            await trio.to_thread.run_sync(_finish_install, log.directory, dropped)
        except OSError:
            # What was renamed is complete; a restart finishes the rest (segment_swap.py).
            self.uncleanable.add(key)
            logger.exception("%s-%d: installing the cleaned segments failed", *key)
            return None
        await self._save_checkpoint(log.directory.parent)
        elapsed = time.monotonic() - started
        self.max_clean_time_s = max(self.max_clean_time_s, elapsed)
        self.max_buffer_utilization = max(self.max_buffer_utilization, outcome.buffer_utilization)
        read = outcome.bytes_read
        self.last_recopy_ratio = outcome.bytes_written / read if read else 0.0
        logger.info(
            "%s-%d cleaned: %d -> %d bytes, %d -> %d records in %.2f s (%.1f MB/s)",
            log.topic,
            log.partition,
            outcome.bytes_read,
            outcome.bytes_written,
            outcome.records_read,
            outcome.records_written,
            elapsed,
            outcome.bytes_read / 1e6 / elapsed if elapsed > 0 else math.inf,
        )
        return outcome

    async def _run_pass(self, plan: PassPlan, rate: float) -> PassOutcome:
        """The pass in a child process or a worker thread. A failed pass leaves no
        `.cleaned` or `.swap` file behind (a later load must not install it)."""
        if self.settings.worker == "thread" or self._fault is not None:
            return await trio.to_thread.run_sync(
                functools.partial(run_pass, plan, Throttler(rate, self._stop), self._fault)
            )
        try:
            done = await trio.run_process(
                [sys.executable, "-m", "broker.log.cleaner_worker"],
                stdin=plan_to_json(plan, rate),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_discard_all, plan)
            raise
        if done.returncode == 0:
            return outcome_from_json(done.stdout)
        await trio.to_thread.run_sync(_discard_all, plan)
        if done.returncode == EXIT_CORRUPT:
            raise CorruptSegmentError(done.stdout.decode(errors="replace"))
        raise RuntimeError(
            f"cleaner worker exited with {done.returncode}: "
            f"{done.stderr.decode(errors='replace')[-2000:]}"
        )

    async def _save_checkpoint(self, log_dir: Path) -> None:
        async with self._checkpoint_lock:
            checkpoint = dict(self._checkpoint(log_dir))
            try:
                await trio.to_thread.run_sync(
                    write_offset_checkpoint, log_dir / self._checkpoint_file(), checkpoint
                )
            except OSError as exc:  # costs only a pass over clean data after a restart
                logger.warning("cannot write the cleaner checkpoint in %s: %s", log_dir, exc)

    def state_of(self, log: PartitionLog) -> dict[str, object]:
        """One partition's cleaner state, as `topics describe` prints it."""
        found = self.describe(log)
        state = self.states.get((log.topic, log.partition))
        return {
            "dirty_ratio": round(found.dirty_ratio, 4),
            "first_dirty_offset": found.first_dirty_offset,
            "first_uncleanable_offset": found.first_uncleanable_offset,
            "last_cleaned_ms": state.last_cleaned_ms if state is not None else -1,
            "uncleanable": (log.topic, log.partition) in self.uncleanable,
        }

    # ------------------------------------------------------------ metrics

    def samples(self) -> Iterator[MetricSample]:
        """kafka.log:type=LogCleaner and type=LogCleanerManager gauges, Kafka's names."""
        ratios = [self.describe(log).dirty_ratio for log in self._logs() if log.config.compact]
        now = self._clock()
        for type_, name, value in (
            ("LogCleaner", "max-buffer-utilization-percent", self.max_buffer_utilization * 100),
            ("LogCleaner", "cleaner-recopy-percent", self.last_recopy_ratio * 100),
            ("LogCleaner", "max-clean-time-secs", self.max_clean_time_s),
            ("LogCleaner", "max-compaction-delay-secs", self.max_compaction_delay_s),
            ("LogCleaner", "DeadThreadCount", self.dead_threads),
            ("LogCleanerManager", "max-dirty-percent", max(ratios, default=0.0) * 100),
            ("LogCleanerManager", "uncleanable-partitions-count", len(self.uncleanable)),
            (
                "LogCleanerManager",
                "time-since-last-run-ms",
                now - self.last_run_ms if self.last_run_ms >= 0 else 0,
            ),
        ):
            yield MetricSample("kafka.log", type_, name, (), "gauge", {"value": float(value)})


def _discard_all(plan: PassPlan) -> None:
    for segment in plan.segments:
        discard_cleaned(Path(segment.directory), segment.base_offset)


def _finish_install(directory: Path, dropped: list[LogSegment]) -> None:
    """Make the renames durable and delete the segments that had nothing left."""
    for segment in dropped:
        segment.unlink_files()
    fsync_dir(directory)
