"""The log of one cluster process: every topic, but only the partitions it leads.

Topic metadata comes from the shared `MetadataStore` instead of `__topics.json`;
admin operations are one store transaction each, after which every live
process applies the new image (the caller waits until they have, so a topic
is ready on its leaders when CreateTopics answers). Partitions led elsewhere
are `RemotePartition`s.

On disk the layout stays Kafka's: all processes share `log.dirs`, a partition
directory is opened only by its leader, under a per-partition lock
(`.partition-locks/<topic>-<p>.lock` in its log dir) instead of the whole-dir
lock. Each process keeps its own checkpoints and clean-shutdown marker
(`<kafka name>.node-<id>`): a partition counts as cleanly shut down only when
this node's marker exists and its checkpoint lists the partition; otherwise
it is recovered from the lowest recovery point any checkpoint of the dir
records for it (the single-process files included, which is how a
single-process data dir is adopted without moving data).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import trio

from broker.cluster.cluster_image import ClusterImage, TopicImage
from broker.cluster.metadata_store import MetadataStore
from broker.config import BrokerConfig
from broker.errors import KafkaError
from broker.log._files import read_offset_checkpoint
from broker.log.log_cleaner import CLEANER_CHECKPOINT_FILE
from broker.log.log_config import LogConfig, altered_topic_configs
from broker.log.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    LogDirInUseError,
    LogManager,
    validate_topic_name,
)
from broker.log.partition_log import PartitionLog
from broker.log.partition_metadata import adopt_partition_metadata
from broker.log.topic import Topic
from broker.protocol.error_codes import ErrorCode
from broker.remote_partition import RemotePartition

logger = logging.getLogger(__name__)

PARTITION_LOCKS_DIR = ".partition-locks"
PRODUCER_ID_BLOCK = 1000
APPLY_WAIT_S = 10.0
"""How long an admin call waits for the live processes to apply its change."""


def node_file(name: str, node_id: int) -> str:
    return f"{name}.node-{node_id}"


class ClusterLogManager(LogManager):
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        node_id: int,
        *,
        poll_interval_s: float = 0.05,
        clock: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(config, clock=clock)
        self.store = store
        self.node_id = node_id
        self.image = ClusterImage.empty()
        self.poll_interval_s = poll_interval_s
        self.recovery_point_file = node_file(RECOVERY_POINT_FILE, node_id)
        self.log_start_file = node_file(LOG_START_FILE, node_id)
        self.clean_shutdown_file = node_file(CLEAN_SHUTDOWN_FILE, node_id)
        self.cleaner_checkpoint_file = node_file(CLEANER_CHECKPOINT_FILE, node_id)
        self._apply_lock = trio.Lock()
        self._partition_locks: dict[tuple[str, int], int] = {}
        self._next_producer_id = 0
        self._producer_id_end = 0
        self._producer_id_lock = trio.Lock()
        self.image_changed = trio.Event()

    # ------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.open()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_store)
                if self.cleaner is not None:
                    await nursery.start(self.cleaner.run)
                task_status.started()
                await self._background()
        finally:
            with trio.CancelScope(shield=True):
                await self.close()

    async def open(self) -> None:
        try:
            for log_dir in self.log_dirs:
                log_dir.mkdir(parents=True, exist_ok=True)
            image = await trio.to_thread.run_sync(self.store.read_image)
            await self._apply(image, initial=True)
            self._open = True
            await trio.to_thread.run_sync(self._remove_clean_markers)
            local = sum(1 for _ in self._local_logs())
            logger.info(
                "node %d leads %d partitions of %d topics", self.node_id, local, len(self._topics)
            )
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.close()
            raise

    async def close(self) -> None:
        await super().close()
        for fd in self._partition_locks.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._partition_locks.clear()

    def _lock_dirs(self) -> None:
        """No whole-dir lock: the supervisor holds it, processes lock partitions."""

    async def _watch_store(self) -> None:
        """Apply the store's changes: one cheap version read per poll interval."""
        while True:
            await trio.sleep(self.poll_interval_s)
            try:
                version = await trio.to_thread.run_sync(self.store.version)
                if version != self.image.version:
                    await self.refresh()
            except sqlite3.Error:
                # A busy or briefly unreadable store: the next poll tries again.
                logger.exception("cannot read the cluster metadata store")

    async def refresh(self) -> None:
        image = await trio.to_thread.run_sync(self.store.read_image)
        await self._apply(image, initial=False)
        await trio.to_thread.run_sync(self.store.report_applied, self.node_id, image.version)

    # ------------------------------------------------------------ applying images

    async def _apply(self, image: ClusterImage, *, initial: bool) -> None:
        async with self._apply_lock:
            if not initial and image.version <= self.image.version:
                return
            for name, topic in list(self._topics.items()):
                wanted = image.topics.get(name)
                if wanted is None or wanted.topic_id != topic.topic_id:
                    await self._drop(topic)
            checkpoints = await trio.to_thread.run_sync(self._read_checkpoints) if initial else None
            for wanted in image.topics.values():
                current = self._topics.get(wanted.name)
                if current is None:
                    topic = Topic(wanted.name, wanted.topic_id, [], wanted.configs, self._defaults)
                    topic._add_partitions(
                        await self._open_partitions(
                            wanted, range(len(wanted.leaders)), topic.log_config(), checkpoints
                        )
                    )
                    self._register(topic)
                    continue
                if dict(current.configs()) != dict(wanted.configs):
                    current._set_overrides(wanted.configs)
                    self._schedule_changed.set()
                have = len(current.partitions)
                if len(wanted.leaders) > have:
                    current._add_partitions(
                        await self._open_partitions(
                            wanted, range(have, len(wanted.leaders)), current.log_config(), None
                        )
                    )
                    self._register(current)
            self.image = image
            changed, self.image_changed = self.image_changed, trio.Event()
            changed.set()

    async def _open_partitions(
        self,
        wanted: TopicImage,
        numbers: Iterable[int],
        log_config: LogConfig,
        checkpoints: _Checkpoints | None,
    ) -> list[PartitionLog]:
        opened: list[PartitionLog] = []
        for number in numbers:
            leader = wanted.leaders[number]
            if leader != self.node_id:
                opened.append(RemotePartition(wanted.name, number, leader, log_config))
                continue
            opened.append(
                await trio.to_thread.run_sync(
                    self._open_local, wanted.name, number, log_config, checkpoints, wanted.topic_id
                )
            )
        return opened

    def _open_local(
        self,
        name: str,
        number: int,
        log_config: LogConfig,
        checkpoints: _Checkpoints | None,
        topic_id: uuid.UUID,
    ) -> PartitionLog:
        """Load the partition where a log dir has it (at start-up), else create it."""
        existing = [d / f"{name}-{number}" for d in self.log_dirs]
        found = next((d for d in existing if d.is_dir()), None) if checkpoints else None
        directory = found or self._choose_dir(name, number, self._local_locations())
        self._lock_partition(name, number, directory.parent)
        try:
            if found is None or checkpoints is None:
                return self._create_partition(
                    name, number, directory, log_config, topic_id=topic_id
                )
            key = (name, number)
            clean, recovery_point, log_start = checkpoints.lookup(directory.parent, key)
            adopt_partition_metadata(directory, topic_id)
            return PartitionLog.load(
                name,
                number,
                directory,
                log_config,
                clock=self._clock,
                clean=clean,
                recovery_point=recovery_point,
                log_start_offset=log_start,
            )
        except BaseException:
            self._unlock_partition(name, number)
            raise

    async def _drop(self, topic: Topic) -> None:
        """The topic is gone from the store: stop serving it, remove what this node led."""
        self._unregister(topic)
        local = [p for p in topic.partitions if not isinstance(p, RemotePartition)]
        for log in topic.partitions:
            log.mark_deleted()
        await self._remove_partitions(local)
        for log in local:
            self._unlock_partition(log.topic, log.partition)
        logger.info("deleted topic %s (%s)", topic.name, topic.topic_id)

    # ------------------------------------------------------------ admin operations

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> Topic:
        validate_topic_name(name)
        overrides = dict(configs or {})
        if num_partitions == -1:
            num_partitions = self.default_partitions
        self._check_new_topic(name, num_partitions, replication_factor, overrides)
        if validate_only:
            return self._planned_topic(name, num_partitions, overrides)
        try:
            version = await self._store_call(
                self.store.create_topic, name, uuid.uuid4(), num_partitions, overrides
            )
        except KafkaError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                await self.refresh()  # another process created it: let the caller see it
            raise
        await self._await_applied(version)
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} was deleted")
        logger.info(
            "created topic %s (%s) with %d partitions", name, topic.topic_id, num_partitions
        )
        return topic

    async def delete_topic(self, name: str) -> None:
        if not self.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        version = await self._store_call(self.store.delete_topic, name)
        await self._await_applied(version)

    async def create_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> None:
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if total <= len(topic.partitions):
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic currently has {len(topic.partitions)} partitions, {total} would not be "
                "an increase",
            )
        if validate_only:
            return
        version = await self._store_call(self.store.add_partitions, name, total)
        await self._await_applied(version)

    async def alter_topic_configs(
        self,
        name: str,
        set_: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        replace_all: bool = False,
        validate_only: bool = False,
    ) -> None:
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
        version = await self._store_call(self.store.set_topic_configs, name, new)
        await self._await_applied(version)

    async def allocate_producer_id(self) -> int:
        """Blocks of ids reserved in the store, so no two processes hand out the same id."""
        async with self._producer_id_lock:
            if self._next_producer_id >= self._producer_id_end:
                start = await self._store_call(self.store.allocate_producer_ids, PRODUCER_ID_BLOCK)
                self._next_producer_id, self._producer_id_end = start, start + PRODUCER_ID_BLOCK
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id

    async def _store_call(self, function: Callable[..., int], *args: object) -> int:
        try:
            return await trio.to_thread.run_sync(function, *args)
        except (OSError, sqlite3.Error) as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"metadata store: {exc}") from exc

    async def _await_applied(self, version: int) -> None:
        """Apply `version` here, then wait (bounded) until every live process has."""
        await self.refresh()
        with trio.move_on_after(APPLY_WAIT_S):
            while True:
                image = await trio.to_thread.run_sync(self.store.read_image)
                behind = [
                    b.node_id
                    for b in image.brokers.values()
                    if b.alive and b.applied_version < version
                ]
                if not behind:
                    return
                await trio.sleep(self.poll_interval_s / 5)
        logger.warning("metadata version %d not yet applied by every live process", version)

    # ------------------------------------------------------------ files

    def _local_logs(self) -> Iterator[PartitionLog]:
        for topic in self._topics.values():
            for log in topic.partitions:
                if not isinstance(log, RemotePartition):
                    yield log

    def _local_locations(self) -> dict[tuple[str, int], Path]:
        return {(p.topic, p.partition): p.directory for p in self._local_logs()}

    def _offsets(self) -> dict[Path, tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]]:
        result: dict[Path, tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]] = {
            d: ({}, {}) for d in self.log_dirs
        }
        for log in self._local_logs():
            entry = result.setdefault(log.directory.parent, ({}, {}))
            key = (log.topic, log.partition)
            entry[0][key] = log.recovery_point
            entry[1][key] = log.log_start_offset
        return result

    def _read_checkpoints(self) -> _Checkpoints:
        return _Checkpoints(self.log_dirs, self.node_id)

    def _lock_partition(self, name: str, number: int, log_dir: Path) -> None:
        locks = log_dir / PARTITION_LOCKS_DIR
        locks.mkdir(exist_ok=True)
        fd = os.open(locks / f"{name}-{number}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirInUseError(
                f"partition {name}-{number} in {log_dir} is open in another broker process"
            ) from None
        self._partition_locks[(name, number)] = fd

    def _unlock_partition(self, name: str, number: int) -> None:
        fd = self._partition_locks.pop((name, number), None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class _Checkpoints:
    """Every checkpoint file of the log dirs, read once at start-up."""

    def __init__(self, log_dirs: list[Path], node_id: int) -> None:
        self.node_id = node_id
        self.own: dict[Path, tuple[bool, dict[tuple[str, int], int], dict[tuple[str, int], int]]]
        self.own = {}
        self.others: dict[
            Path, list[tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]]
        ] = {}
        for log_dir in log_dirs:
            clean = (log_dir / node_file(CLEAN_SHUTDOWN_FILE, node_id)).exists()
            self.own[log_dir] = (
                clean,
                read_offset_checkpoint(log_dir / node_file(RECOVERY_POINT_FILE, node_id)),
                read_offset_checkpoint(log_dir / node_file(LOG_START_FILE, node_id)),
            )
            others = []
            for entry in os.scandir(log_dir):
                name = entry.name
                if name == RECOVERY_POINT_FILE or (
                    name.startswith(RECOVERY_POINT_FILE + ".node-")
                    and name != node_file(RECOVERY_POINT_FILE, node_id)
                ):
                    suffix = name[len(RECOVERY_POINT_FILE) :]
                    others.append(
                        (
                            read_offset_checkpoint(Path(entry.path)),
                            read_offset_checkpoint(log_dir / (LOG_START_FILE + suffix)),
                        )
                    )
            self.others[log_dir] = others

    def lookup(self, log_dir: Path, key: tuple[str, int]) -> tuple[bool, int, int]:
        """(clean, recovery point, log start offset) for one partition."""
        clean, recovery_points, starts = self.own.get(log_dir, (False, {}, {}))
        if key in recovery_points:
            return clean, recovery_points[key], starts.get(key, 0)
        points = [r[key] for r, _ in self.others.get(log_dir, []) if key in r]
        log_starts = [s[key] for _, s in self.others.get(log_dir, []) if key in s]
        return False, min(points, default=0), max(log_starts, default=0)
