"""LogManager: every partition log of the broker, topic metadata and background work.

On-disk layout under each `log.dirs` entry (Kafka's where Kafka has one):

* ``<topic>-<partition>/`` with ``<20-digit base offset>.log|.index|.timeindex``,
  ``.txnindex`` (aborted transactions, once the segment has one) and
  ``<offset>.snapshot`` (producer state);
* ``.kafka_cleanshutdown``: written after a clean shutdown, removed once loaded;
* ``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint``
  (Kafka's text format), and ``replication-offset-checkpoint`` (high watermarks)
  once replication has set one;
* ``<topic>-<partition>/leader-epoch-checkpoint`` (broker/replication/);
* ``.lock``: flock'd while a broker uses the directory;
* first log dir only: ``__topics.json`` (topic metadata),
  ``producer-id-block`` (see producer_id_manager.py) and
  ``transaction-state.journal`` (broker/transaction/transaction_log.py).

A deleted topic's partition directories are renamed to
``<topic>-<p>.<uuid>-delete`` and removed in a worker thread; leftovers are
removed at start-up.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import trio

from broker.config import BrokerConfig
from broker.errors import KafkaError
from broker.log._files import fsync_dir, read_offset_checkpoint, write_offset_checkpoint
from broker.log.log_cleaner import CLEANER_CHECKPOINT_FILE, CleanerSettings, LogCleaner
from broker.log.log_config import (
    LogConfig,
    altered_topic_configs,
    broker_topic_defaults,
    validate_topic_configs,
)
from broker.log.log_segment import LogSegment
from broker.log.partition_log import PartitionLog
from broker.log.partition_metadata import adopt_partition_metadata, write_partition_metadata
from broker.log.producer_id_manager import ProducerIdManager
from broker.log.topic import Topic
from broker.log.topic_store import TopicRecord, TopicStore
from broker.protocol.error_codes import ErrorCode

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"
LOCK_FILE = ".lock"
DELETE_SUFFIX = "-delete"
MAX_TOPIC_NAME_LENGTH = 249
# Kafka's log.flush.offset.checkpoint.interval.ms default (the key is not in CONFIG_DEFS).
CHECKPOINT_INTERVAL_S = 60.0
_MIN_FLUSH_TICK_S = 0.01
_NO_FLUSH_MS = 2**62
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate; raises KafkaError INVALID_TOPIC_EXCEPTION."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if not _TOPIC_NAME.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


class LogDirInUseError(OSError):
    """Another process holds the log dir's lock: a start-up failure, reported in one line."""


class LogManager:
    """Owns every byte the log writes (docs/design/log-api.md). A Service: `run`
    loads and recovers, reports started, runs retention / time-based flush and
    checkpoints, and closes cleanly (writing the clean-shutdown marker) on cancel.
    Tests may use `open` / `close` directly."""

    # File names in each log dir; a cluster process uses its own (broker/cluster/).
    recovery_point_file = RECOVERY_POINT_FILE
    log_start_file = LOG_START_FILE
    replication_offset_file = REPLICATION_OFFSET_FILE
    clean_shutdown_file = CLEAN_SHUTDOWN_FILE
    cleaner_checkpoint_file = CLEANER_CHECKPOINT_FILE

    def __init__(self, config: BrokerConfig, *, clock: Callable[[], int] | None = None) -> None:
        self.config = config
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self.auto_create_topics = config.log.auto_create_topics_enable
        self.default_partitions = config.log.num_partitions
        self.delete_topic_enable = config.log.delete_topic_enable
        self._defaults = broker_topic_defaults(config)
        self._clock = clock or _wall_clock_ms
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._store = TopicStore(self.log_dirs[0])
        self._producer_ids = ProducerIdManager(self.log_dirs[0])
        self._admin_lock = trio.Lock()
        self._checkpoint_lock = trio.Lock()
        self._schedule_changed = trio.Event()
        self._lock_fds: list[int] = []
        self._open = False
        # Kafka's LogManager owns its LogCleaner (none with log.cleaner.enable=false).
        self.cleaner = (
            LogCleaner(
                CleanerSettings.from_config(config),
                self._local_logs,
                clock=self._clock,
                checkpoint_file=lambda: self.cleaner_checkpoint_file,
            )
            if config.log.cleaner_enable
            else None
        )

    @property
    def clock(self) -> Callable[[], int]:
        """Milliseconds, the log's clock (the cleaner's horizons use it too)."""
        return self._clock

    def _local_logs(self) -> Iterator[PartitionLog]:
        """The partitions whose log is here (not another process's, in a cluster)."""
        for topic in list(self._topics.values()):
            for partition in list(topic.partitions):
                if isinstance(partition, PartitionLog):
                    yield partition

    def local_logs(self) -> list[PartitionLog]:
        """Every partition log in this broker's dirs, a follower's too (DescribeLogDirs)."""
        return list(self._local_logs())

    def cleaner_state(self, topic_name: str) -> str | None:
        """The cleaner's view of each partition of a compacted topic as JSON (what
        `topics describe` shows); None for other topics or without a cleaner."""
        topic = self._topics.get(topic_name)
        if topic is None or self.cleaner is None:
            return None
        logs = [p for p in topic.partitions if isinstance(p, PartitionLog) and p.config.compact]
        if not logs:
            return None
        return json.dumps({str(log.partition): self.cleaner.state_of(log) for log in logs})

    # ------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.open()
        try:
            async with trio.open_nursery() as nursery:
                if self.cleaner is not None:
                    await nursery.start(self.cleaner.run)
                task_status.started()
                await self._background()
        finally:
            with trio.CancelScope(shield=True):
                await self.close()

    async def open(self) -> None:
        """Lock the log dirs, load topic metadata and every partition (recovering
        where needed, in worker threads, num.recovery.threads.per.data.dir at a
        time per dir). Raises OSError / ValueError when the log cannot be loaded,
        and RuntimeError when another broker holds a log dir; whatever was opened
        is closed again."""
        try:
            await trio.to_thread.run_sync(self._lock_dirs)
            records = await trio.to_thread.run_sync(self._store.load)
            await trio.to_thread.run_sync(self._producer_ids.load)
            clean = {d: (d / CLEAN_SHUTDOWN_FILE).exists() for d in self.log_dirs}
            locations = await trio.to_thread.run_sync(self._scan_dirs)
            limit = self.config.log.num_recovery_threads_per_data_dir * len(self.log_dirs)
            limiter = trio.CapacityLimiter(limit)
            checkpoints = {
                d: (
                    read_offset_checkpoint(d / RECOVERY_POINT_FILE),
                    read_offset_checkpoint(d / LOG_START_FILE),
                )
                for d in self.log_dirs
            }
            high_watermarks = {
                d: read_offset_checkpoint(d / self.replication_offset_file) for d in self.log_dirs
            }
            loaded: dict[tuple[str, int], PartitionLog] = {}

            async def load_one(record: TopicRecord, partition: int) -> None:
                key = (record.name, partition)
                directory = locations.get(key)
                log_config = Topic(
                    record.name, record.topic_id, [], record.configs, self._defaults
                ).log_config()
                if directory is None:
                    directory = self._choose_dir(record.name, partition, locations)
                    log = await trio.to_thread.run_sync(
                        functools.partial(
                            self._create_partition,
                            record.name,
                            partition,
                            directory,
                            log_config,
                            topic_id=record.topic_id,
                        ),
                        limiter=limiter,
                    )
                else:
                    log_dir = directory.parent
                    recovery_points, starts = checkpoints.get(log_dir, ({}, {}))
                    log = await trio.to_thread.run_sync(
                        lambda: PartitionLog.load(
                            record.name,
                            partition,
                            directory,
                            log_config,
                            clock=self._clock,
                            clean=clean.get(log_dir, False),
                            recovery_point=recovery_points.get(key, 0),
                            log_start_offset=starts.get(key, 0),
                        ),
                        limiter=limiter,
                    )
                    await trio.to_thread.run_sync(
                        adopt_partition_metadata, directory, record.topic_id, limiter=limiter
                    )
                    high_watermark = high_watermarks.get(log_dir, {}).get(key)
                    if high_watermark is not None:
                        log.update_high_watermark(high_watermark)
                loaded[key] = log

            async with trio.open_nursery() as nursery:
                for record in records.values():
                    for partition in range(record.num_partitions):
                        nursery.start_soon(load_one, record, partition)
            for record in records.values():
                partitions = [loaded[(record.name, p)] for p in range(record.num_partitions)]
                self._register(
                    Topic(record.name, record.topic_id, partitions, record.configs, self._defaults)
                )
            self._open = True
            await trio.to_thread.run_sync(self._remove_clean_markers)
            logger.info("loaded %d topics, %d partitions", len(self._topics), len(loaded))
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.close()
            raise

    async def close(self) -> None:
        """Flush and close every partition, write checkpoints and (when all of that
        worked) the clean-shutdown markers; unlock the dirs. Errors are logged:
        without the marker the next start recovers."""
        ok = True
        logs = [p for t in self._topics.values() for p in t.partitions]
        for log in logs:
            try:
                await trio.to_thread.run_sync(functools.partial(log.close, clean=True))
            except OSError:
                logger.exception("cannot close %r cleanly", log)
                ok = False
        if self._open:
            try:
                await trio.to_thread.run_sync(
                    self._write_checkpoints, self._offsets(), self._high_watermarks()
                )
                if ok:
                    await trio.to_thread.run_sync(self._write_clean_markers)
            except OSError:
                logger.exception("cannot write the log's checkpoints")
        self._open = False
        self._topics.clear()
        self._by_id.clear()
        for fd in self._lock_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock_fds.clear()

    async def _background(self) -> None:
        """Retention every log.retention.check.interval.ms, checkpoints every minute,
        and time-based flushing ticking at the smallest finite flush.ms (Kafka's
        flush scheduler); sleeps until the next deadline in between."""
        retention_s = self.config.log.retention_check_interval_ms / 1000
        now = trio.current_time()
        next_retention = now + retention_s
        next_checkpoint = now + CHECKPOINT_INTERVAL_S
        while True:
            flush_ms = min(
                (
                    p.config.flush_ms
                    for t in self._topics.values()
                    for p in t.partitions
                    if p.config.flush_ms < _NO_FLUSH_MS
                ),
                default=None,
            )
            flush_tick = math.inf if flush_ms is None else max(flush_ms / 1000, _MIN_FLUSH_TICK_S)
            # Topic creation and config changes wake the loop to re-plan its ticks.
            with trio.move_on_at(min(next_retention, next_checkpoint, now + flush_tick)):
                await self._schedule_changed.wait()
            self._schedule_changed = trio.Event()
            now = trio.current_time()
            if flush_ms is not None:
                await self._flush_due(now)
            if now >= next_retention:
                await self.run_retention_now()
                next_retention = now + retention_s
            if now >= next_checkpoint:
                await self.checkpoint()
                next_checkpoint = now + CHECKPOINT_INTERVAL_S

    async def _flush_due(self, now: float) -> None:
        for topic in list(self._topics.values()):
            for log in topic.partitions:
                due = log.last_flush_time + log.config.flush_ms / 1000
                if log.has_unflushed_data and now >= due:
                    try:
                        await log.flush()
                    except KafkaError:
                        logger.exception("time-based flush of %r failed", log)

    async def run_retention_now(self) -> int:
        """Apply retention to every partition now; returns segments deleted."""
        now_ms = self._clock()
        deleted = 0
        for topic in list(self._topics.values()):
            for log in topic.partitions:
                if not log.deleted:
                    deleted += await log.apply_retention(now_ms)
        return deleted

    async def checkpoint(self) -> None:
        """Persist recovery points and log start offsets (worker thread)."""
        async with self._checkpoint_lock:
            if self._open:
                await trio.to_thread.run_sync(
                    self._write_checkpoints, self._offsets(), self._high_watermarks()
                )

    # ------------------------------------------------------------ topics

    def topics(self) -> Mapping[str, Topic]:
        return self._topics

    def topic(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        found = self._topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return None
        return found.partitions[partition]

    def topic_config_defaults(self) -> Mapping[str, str]:
        return dict(self._defaults)

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> Topic:
        """Create a topic (num_partitions -1 = num.partitions, as CreateTopics v4+).

        Raises KafkaError TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
        INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG, or
        KAFKA_STORAGE_ERROR when the directories or metadata cannot be written
        (what was created is removed again). ``validate_only`` returns a Topic
        with no partition logs and `num_partitions` set.
        """
        validate_topic_name(name)
        overrides = dict(configs or {})
        if num_partitions == -1:
            num_partitions = self.default_partitions
        self._check_new_topic(name, num_partitions, replication_factor, overrides)
        if validate_only:
            return self._planned_topic(name, num_partitions, overrides)
        async with self._admin_lock:
            self._check_new_topic(name, num_partitions, replication_factor, overrides)
            topic = Topic(name, uuid.uuid4(), [], overrides, self._defaults)
            log_config = topic.log_config()
            partitions = await self._create_partitions(
                name, range(num_partitions), log_config, topic.topic_id
            )
            topic._add_partitions(partitions)
            self._register(topic)
            try:
                await self._save_metadata()
            except KafkaError:
                self._unregister(topic)
                await self._remove_partitions(partitions)
                raise
            logger.info(
                "created topic %s (%s) with %d partitions", name, topic.topic_id, num_partitions
            )
            return topic

    def _planned_topic(self, name: str, num_partitions: int, overrides: Mapping[str, str]) -> Topic:
        """What validate_only answers: a Topic whose partitions are empty, unopened
        logs (no file is touched; appends to them are refused)."""
        topic = Topic(name, uuid.uuid4(), [], overrides, self._defaults)
        log_config = topic.log_config()
        planned = []
        for number in range(num_partitions):
            directory = self._choose_dir(name, number, {})
            segment = LogSegment(
                directory, 0, index_interval_bytes=log_config.index_interval_bytes, created_ms=0
            )
            log = PartitionLog(
                name,
                number,
                directory,
                log_config,
                clock=self._clock,
                segments=[segment],
                log_start_offset=0,
                recovery_point=0,
            )
            log.deleted = True
            planned.append(log)
        topic._add_partitions(planned)
        return topic

    def _check_new_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
        collision = name.replace(".", "_")
        for existing in self._topics:
            if existing.replace(".", "_") == collision:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"topic '{name}' collides with existing topic: {existing}",
                )
        if num_partitions < 1:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"number of partitions must be at least 1, got {num_partitions}",
            )
        if replication_factor not in (1, -1):
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the 1 available broker",
            )
        validate_topic_configs(configs, topic=name)

    async def delete_topic(self, name: str) -> None:
        """Remove the topic: appends and fetches on it stop at once (fetchers are
        woken), metadata is rewritten, directories are renamed `...-delete` and
        removed in a worker thread. Raises KafkaError UNKNOWN_TOPIC_OR_PARTITION,
        TOPIC_DELETION_DISABLED, KAFKA_STORAGE_ERROR (metadata write failed)."""
        if not self.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        async with self._admin_lock:
            topic = self._topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
            self._unregister(topic)
            for log in topic.partitions:
                log.mark_deleted()
            if self.cleaner is not None:
                self.cleaner.forget_topic(name)
            await self._save_metadata()
            await self._remove_partitions(list(topic.partitions))
            logger.info("deleted topic %s (%s)", name, topic.topic_id)

    async def create_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> None:
        """Raise a topic's partition count to ``total``. KafkaError
        UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (total <= current),
        KAFKA_STORAGE_ERROR."""
        async with self._admin_lock:
            topic = self._topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
            current = len(topic.partitions)
            if total <= current:
                raise KafkaError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"topic currently has {current} partitions, {total} would not be an increase",
                )
            if validate_only:
                return
            partitions = await self._create_partitions(
                name, range(current, total), topic.log_config(), topic.topic_id
            )
            topic._add_partitions(partitions)
            self._schedule_changed.set()
            await self._save_metadata()

    async def alter_topic_configs(
        self,
        name: str,
        set_: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        replace_all: bool = False,
        validate_only: bool = False,
    ) -> None:
        """Change overrides (IncrementalAlterConfigs; ``replace_all`` for AlterConfigs).
        KafkaError UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, KAFKA_STORAGE_ERROR."""
        async with self._admin_lock:
            topic = self._topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
            new = altered_topic_configs(
                name,
                topic.configs(),
                set_,
                delete,
                replace_all=replace_all,
                internal=topic.is_internal,
            )
            if validate_only:
                return
            old = topic.configs()
            topic._set_overrides(new)
            self._schedule_changed.set()
            try:
                await self._save_metadata()
            except KafkaError:
                topic._set_overrides(old)
                raise

    # ------------------------------------------------------------ producers

    async def allocate_producer_id(self) -> int:
        """A producer id never returned before, even across restarts.
        KafkaError KAFKA_STORAGE_ERROR when the reservation cannot be persisted."""
        try:
            return await self._producer_ids.allocate()
        except OSError as exc:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"cannot reserve producer ids: {exc}"
            ) from exc

    # ------------------------------------------------------------ helpers

    def _register(self, topic: Topic) -> None:
        self._schedule_changed.set()
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        for log in topic.partitions:
            log.on_log_start_offset_change = self.checkpoint

    def _unregister(self, topic: Topic) -> None:
        self._topics.pop(topic.name, None)
        self._by_id.pop(topic.topic_id, None)

    async def _save_metadata(self) -> None:
        records = {
            t.name: TopicRecord(t.name, t.topic_id, len(t.partitions), t.configs())
            for t in self._topics.values()
        }
        try:
            await trio.to_thread.run_sync(self._store.save, records)
        except OSError as exc:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"cannot write topic metadata: {exc}"
            ) from exc

    async def _create_partitions(
        self, name: str, numbers: Iterable[int], log_config: LogConfig, topic_id: uuid.UUID
    ) -> list[PartitionLog]:
        locations = {
            (t.name, p.partition): p.directory for t in self._topics.values() for p in t.partitions
        }
        created: list[PartitionLog] = []
        try:
            for number in numbers:
                directory = self._choose_dir(name, number, locations)
                log = await trio.to_thread.run_sync(
                    functools.partial(
                        self._create_partition,
                        name,
                        number,
                        directory,
                        log_config,
                        topic_id=topic_id,
                    )
                )
                log.on_log_start_offset_change = self.checkpoint
                locations[(name, number)] = directory
                created.append(log)
        except OSError as exc:
            await self._remove_partitions(created)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create {name}: {exc}") from exc
        return created

    def _create_partition(
        self,
        name: str,
        number: int,
        directory: Path,
        log_config: LogConfig,
        *,
        topic_id: uuid.UUID | None = None,
    ) -> PartitionLog:
        """A new empty log; with the topic id its `partition.metadata` (Kafka 2.8+)."""
        if directory.exists():
            # A leftover from a creation that crashed before the metadata was written.
            shutil.rmtree(directory)
        log = PartitionLog.create(name, number, directory, log_config, clock=self._clock)
        if topic_id is not None:
            write_partition_metadata(directory, topic_id)
        return log

    async def _remove_partitions(self, logs: list[PartitionLog]) -> None:
        for log in logs:
            log.mark_deleted()

        def remove() -> None:
            for log in logs:
                doomed = log.directory.with_name(
                    f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
                )
                try:
                    os.rename(log.directory, doomed)
                    fsync_dir(doomed.parent)
                except FileNotFoundError:
                    continue
                shutil.rmtree(doomed, ignore_errors=True)

        await trio.to_thread.run_sync(remove)

    def _choose_dir(
        self, name: str, number: int, locations: Mapping[tuple[str, int], Path]
    ) -> Path:
        """The log dir holding the fewest partitions (Kafka's placement rule)."""
        counts = {d: 0 for d in self.log_dirs}
        for directory in locations.values():
            if directory.parent in counts:
                counts[directory.parent] += 1
        best = min(self.log_dirs, key=lambda d: counts[d])
        return best / f"{name}-{number}"

    def _lock_dirs(self) -> None:
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LogDirInUseError(
                    f"log dir {log_dir} is in use by another broker process"
                ) from None
            self._lock_fds.append(fd)

    def _scan_dirs(self) -> dict[tuple[str, int], Path]:
        """Find partition directories; remove leftovers of deletions."""
        found: dict[tuple[str, int], Path] = {}
        for log_dir in self.log_dirs:
            for entry in os.scandir(log_dir):
                if not entry.is_dir():
                    continue
                if entry.name.endswith(DELETE_SUFFIX):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                match = _PARTITION_DIR.match(entry.name)
                if match:
                    found[(match.group(1), int(match.group(2)))] = Path(entry.path)
        return found

    def _offsets(self) -> dict[Path, tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]]:
        result: dict[Path, tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]] = {
            d: ({}, {}) for d in self.log_dirs
        }
        for topic in self._topics.values():
            for log in topic.partitions:
                entry = result.setdefault(log.directory.parent, ({}, {}))
                key = (log.topic, log.partition)
                entry[0][key] = log.recovery_point
                entry[1][key] = log.log_start_offset
        return result

    def _high_watermarks(self) -> dict[Path, dict[tuple[str, int], int]]:
        """Replication's high watermarks per log dir (Kafka's
        replication-offset-checkpoint); none for logs replication never touched."""
        result: dict[Path, dict[tuple[str, int], int]] = {}
        for topic in self._topics.values():
            for log in topic.partitions:
                high_watermark = log.replicated_high_watermark
                if high_watermark is not None:
                    key = (log.topic, log.partition)
                    result.setdefault(log.directory.parent, {})[key] = high_watermark
        return result

    def _write_checkpoints(
        self,
        offsets: Mapping[Path, tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]],
        high_watermarks: Mapping[Path, dict[tuple[str, int], int]] | None = None,
    ) -> None:
        for log_dir, (recovery_points, starts) in offsets.items():
            write_offset_checkpoint(log_dir / self.recovery_point_file, recovery_points)
            write_offset_checkpoint(log_dir / self.log_start_file, starts)
            # Written only where replication keeps high watermarks (or kept once it did),
            # so a broker without replication writes exactly the files it always wrote.
            path = log_dir / self.replication_offset_file
            marks = (high_watermarks or {}).get(log_dir, {})
            if marks or path.exists():
                write_offset_checkpoint(path, marks)

    def _write_clean_markers(self) -> None:
        for log_dir in self.log_dirs:
            (log_dir / self.clean_shutdown_file).write_bytes(b"")
            fsync_dir(log_dir)

    def _remove_clean_markers(self) -> None:
        for log_dir in self.log_dirs:
            marker = log_dir / self.clean_shutdown_file
            if marker.exists():
                marker.unlink()
                fsync_dir(log_dir)
