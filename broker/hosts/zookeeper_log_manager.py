"""The log of a broker among hosts: every topic in ZooKeeper, a local log for each
partition this broker is a replica of.

Topics come from ZooKeeper (`PartitionStateView`), not `__topics.json`: CreateTopics
writes `/config/topics/<t>` and `/brokers/topics/<t>` (placement by
`assign_replicas_to_brokers` over the live brokers and their racks, the topic id in
the znode so every broker reports the same), the controller writes each partition's
first state, and every broker applies what it sees: it creates (or, after a
restart, loads) the log of each partition whose replicas name it. In a topic the
handlers see that log where this broker leads the partition (its batches stamped
with the leader epoch from ZooKeeper) and a `RemotePartition` elsewhere, which
refuses data operations with NOT_LEADER_OR_FOLLOWER; a follower's log is kept
aside for the replica fetchers (broker/hosts/replica_fetchers.py).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path

import attrs
import trio
import trio_util

from broker.config import BrokerConfig
from broker.coordination.broker_registration import BrokerRegistration, MalformedZnode
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.partition_state_znodes import TOPICS_PATH, TopicAssignment, topic_path
from broker.coordination.producer_id_block import ZooKeeperProducerIds
from broker.coordination.store import (
    BadVersionError,
    CoordinationStore,
    CoordinationUnavailable,
    NodeExistsError,
    NoNodeError,
)
from broker.errors import KafkaError
from broker.hosts.partition_state_view import (
    TOPIC_CONFIG_PATH,
    HostsImage,
    PartitionStateView,
    TopicState,
    encode_topic_id,
    topic_config_path,
)
from broker.log._files import fsync_dir, read_offset_checkpoint
from broker.log.log_config import LogConfig, altered_topic_configs
from broker.log.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_SUFFIX,
    LOG_START_FILE,
    LogManager,
    validate_topic_name,
)
from broker.log.partition_log import PartitionLog
from broker.log.partition_metadata import (
    MalformedPartitionMetadata,
    read_partition_metadata,
    write_partition_metadata,
)
from broker.log.topic import Topic
from broker.protocol.error_codes import ErrorCode
from broker.remote_partition import RemotePartition
from broker.replication.leader_and_isr import NO_LEADER
from broker.replication.replica_assignment import (
    BrokerMetadata,
    RackInformationIncomplete,
    assign_new_partitions,
    assign_replicas_to_brokers,
)

logger = logging.getLogger(__name__)

CREATE_WAIT_S = 10.0
"""How long CreateTopics, CreatePartitions, DeleteTopics and config changes wait for
this broker to apply what the controller (or ZooKeeper) made of them."""


@attrs.frozen
class FoundLog:
    """A partition dir found at start-up, before ZooKeeper's view says whose it is."""

    clean: bool  # its log dir was shut down cleanly
    log_start_offset: int
    topic_id: uuid.UUID | None  # from its `partition.metadata`; None: it has none


Layout = tuple[tuple[int, bool], ...]
"""Per partition of a topic: its leader, and whether its log here is the topic's."""


class ZooKeeperLogManager(LogManager):
    def __init__(
        self,
        config: BrokerConfig,
        node_id: int,
        store: CoordinationStore,
        view: PartitionStateView,
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
    ) -> None:
        super().__init__(config)
        self.node_id = node_id
        self._zookeeper = store
        self._states = PartitionStateStore(store)
        self._zookeeper_producer_ids = ZooKeeperProducerIds(store, node_id)
        self._view = view
        self._live_brokers = live_brokers
        self._replica_logs: dict[tuple[str, int], PartitionLog] = {}
        self._layouts: dict[str, Layout] = {}
        self._apply_lock = trio.Lock()
        self._found: dict[tuple[str, int], FoundLog] = {}
        self._strays_checked = False
        self._leading: dict[tuple[str, int], int] = {}  # partition -> leader epoch led at
        self.applied: trio_util.AsyncValue[HostsImage] = trio_util.AsyncValue({})

    # ------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.open()
        try:
            async with trio.open_nursery() as nursery:
                if self.cleaner is not None:
                    await nursery.start(self.cleaner.run)
                nursery.start_soon(self._follow_view)
                task_status.started()
                await self._background()
        finally:
            with trio.CancelScope(shield=True):
                await self.close()

    async def open(self) -> None:
        """Lock the dirs and note which partitions they hold; the logs are opened as
        ZooKeeper's topics name them."""
        await trio.to_thread.run_sync(self._lock_dirs)
        await trio.to_thread.run_sync(self._producer_ids.load)
        self._found = await trio.to_thread.run_sync(self._scan_for_recovery)
        self._open = True
        await trio.to_thread.run_sync(self._remove_clean_markers)

    async def close(self) -> None:
        """The followers' logs first (the topics' are closed by the LogManager)."""
        in_topics = {id(p) for t in self._topics.values() for p in t.partitions}
        for log in self._replica_logs.values():
            if id(log) not in in_topics:
                try:
                    await trio.to_thread.run_sync(functools.partial(log.close, clean=True))
                except OSError:
                    logger.exception("cannot close %r cleanly", log)
        await super().close()
        self._replica_logs.clear()

    def replica_log(self, topic: str, partition: int) -> PartitionLog | None:
        """This broker's log of a partition it is a replica of (leader or follower)."""
        return self._replica_logs.get((topic, partition))

    def _local_logs(self) -> Iterator[PartitionLog]:
        yield from list(self._replica_logs.values())

    def _offsets(self) -> dict[Path, tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]]:
        result: dict[Path, tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]] = {
            d: ({}, {}) for d in self.log_dirs
        }
        for log in self._replica_logs.values():
            entry = result.setdefault(log.directory.parent, ({}, {}))
            key = (log.topic, log.partition)
            entry[0][key] = log.recovery_point
            entry[1][key] = log.log_start_offset
        return result

    def _scan_for_recovery(self) -> dict[tuple[str, int], FoundLog]:
        """Partition dirs present -> (shut down cleanly, log start offset, topic id of
        its `partition.metadata`); a log found is recovered from its start unless the
        dir's clean-shutdown marker is there."""
        found = {}
        for key, directory in self._scan_dirs().items():
            log_dir = directory.parent
            starts = read_offset_checkpoint(log_dir / LOG_START_FILE)
            clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
            try:
                topic_id = read_partition_metadata(directory)
            except MalformedPartitionMetadata as exc:
                logger.warning("%s: adopted as the topic's when opened", exc)
                topic_id = None
            found[key] = FoundLog(clean, starts.get(key, 0), topic_id)
        return found

    # ------------------------------------------------------------ applying ZooKeeper's view

    async def _follow_view(self) -> None:
        await self._view.loaded.wait()  # the first image applied is ZooKeeper's whole
        async for image in self._view.image.eventual_values():
            await self._apply(image)

    async def _apply(self, image: HostsImage) -> None:
        async with self._apply_lock:
            doomed: list[PartitionLog] = []
            replaced: list[PartitionLog] = []
            for name, topic in list(self._topics.items()):
                wanted = image.get(name)
                if wanted is None or wanted.topic_id != topic.topic_id:
                    # Deleted (or deleted and created again): its replicas' logs go.
                    self._unregister(topic)
                    self._layouts.pop(name, None)
                    forgotten = self._forget_replicas(name)
                    if wanted is None:
                        doomed += forgotten
                    else:
                        replaced += forgotten
            if replaced:
                # Deleted and created again in one image (a full re-read after a session
                # renewal): the new logs take the same dirs, so the old ones go first.
                await self._remove_partitions(replaced)
            if not self._strays_checked and self._view.loaded.is_set():
                self._strays_checked = True  # once: the first image is ZooKeeper's whole
                await self._delete_stray_logs(image)  # before a stray is opened as a replica
            for name, wanted in image.items():
                await self._apply_topic(name, wanted)
                doomed += self._forget_moved_replicas(name, wanted)
            # The fetchers and leaders let go of the partitions before their logs go.
            self.applied.value = image
            if doomed:
                await self._remove_partitions(doomed)
            if doomed or replaced:
                deleted = sorted({log.topic for log in doomed + replaced})
                logger.info("deleted the logs of %s", deleted)

    async def _delete_stray_logs(self, image: HostsImage) -> None:
        """Logs found at start-up of partitions ZooKeeper no longer assigns to this broker
        (their topic deleted, or the replica moved away, while it was down), or whose
        `partition.metadata` names another topic id (deleted and created again with the
        same name meanwhile): deleted, as Kafka deletes stray logs once it learns they
        are not its replicas. A dir without the file (written before it existed) is
        adopted by the topic of its name when opened."""
        stray = sorted(
            key
            for key, found in self._found.items()
            if key[0] not in image
            or self.node_id not in image[key[0]].assignment.partitions.get(key[1], ())
            or found.topic_id not in (None, image[key[0]].topic_id)
        )
        if not stray:
            return
        if not image:  # an empty ZooKeeper (a new chroot?) is likelier than every topic gone
            logger.warning(
                "ZooKeeper holds no topics: the %d partition logs found here are kept, not "
                "deleted as stray (is zookeeper.connect the cluster's?)",
                len(stray),
            )
            return
        for key in stray:
            del self._found[key]
        directories = [d / f"{t}-{p}" for t, p in stray for d in self.log_dirs]

        def remove() -> None:
            for directory in directories:
                doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
                try:
                    os.rename(directory, doomed)
                    fsync_dir(doomed.parent)
                except FileNotFoundError:
                    continue
                shutil.rmtree(doomed, ignore_errors=True)

        await trio.to_thread.run_sync(remove)
        logger.warning("deleted stray logs, no longer replicas here: %s", stray)

    def _forget_moved_replicas(self, name: str, wanted: TopicState) -> list[PartitionLog]:
        """Partitions reassigned away from this broker: their logs go."""
        keys = [
            key
            for key in self._replica_logs
            if key[0] == name and self.node_id not in wanted.assignment.partitions.get(key[1], ())
        ]
        for key in keys:
            self._leading.pop(key, None)
            logger.info("%s-%d was reassigned away from broker %d", *key, self.node_id)
        return [self._replica_logs.pop(key) for key in keys]

    def _forget_replicas(self, name: str) -> list[PartitionLog]:
        keys = [key for key in self._replica_logs if key[0] == name]
        for key in keys:
            self._leading.pop(key, None)
        if self.cleaner is not None:
            self.cleaner.forget_topic(name)
        return [self._replica_logs.pop(key) for key in keys]

    async def _apply_topic(self, name: str, wanted: TopicState) -> None:
        log_config = Topic(name, wanted.topic_id, [], wanted.configs, self._defaults).log_config()
        partitions: list[PartitionLog] = []
        layout = []
        for index, replicas in sorted(wanted.assignment.partitions.items()):
            state = wanted.states.get(index)
            leader = NO_LEADER if state is None else state.leader
            log = None
            if self.node_id in replicas:
                log = await self._replica_log(name, index, log_config, wanted.topic_id)
            if log is not None and state is not None and leader == self.node_id:
                if self._leading.get((name, index)) != state.leader_epoch:
                    # Once per epoch: an ISR change must not drop the tracked high watermark.
                    await log.become_leader(state.leader_epoch)
                    self._leading[(name, index)] = state.leader_epoch
                partitions.append(log)
                layout.append((leader, True))
            else:
                self._leading.pop((name, index), None)
                partitions.append(RemotePartition(name, index, leader, log_config))
                layout.append((leader, False))
        known = self._topics.get(name)
        if known is not None and self._layouts.get(name) == tuple(layout):
            if known.configs() != wanted.configs:  # AlterConfigs on some broker
                known._set_overrides(wanted.configs)
                for (topic, _), replica in self._replica_logs.items():
                    if topic == name:
                        replica.config = log_config
            return
        self._layouts[name] = tuple(layout)
        self._register(Topic(name, wanted.topic_id, partitions, wanted.configs, self._defaults))

    async def _replica_log(
        self, name: str, index: int, log_config: LogConfig, topic_id: uuid.UUID
    ) -> PartitionLog:
        key = (name, index)
        log = self._replica_logs.get(key)
        if log is None:
            log = await trio.to_thread.run_sync(
                self._open_replica, name, index, log_config, topic_id
            )
            log.on_log_start_offset_change = self.checkpoint
            self._replica_logs[key] = log
            logger.info("opened the log of %s-%d, a replica here", name, index)
        return log

    def _open_replica(
        self, name: str, index: int, log_config: LogConfig, topic_id: uuid.UUID
    ) -> PartitionLog:
        found = self._found.pop((name, index), None)
        locations = {k: log.directory for k, log in self._replica_logs.items()}
        directory = self._choose_dir(name, index, locations)
        if found is None:
            return self._create_partition(name, index, directory, log_config, topic_id=topic_id)
        existing = next(
            d / f"{name}-{index}" for d in self.log_dirs if (d / f"{name}-{index}").is_dir()
        )
        log = PartitionLog.load(
            name,
            index,
            existing,
            log_config,
            clock=self._clock,
            clean=found.clean,
            recovery_point=0,
            log_start_offset=found.log_start_offset,
        )
        if found.topic_id is None:
            write_partition_metadata(existing, topic_id)  # a dir from before the file
        return log

    # ------------------------------------------------------------ admin operations

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = -1,  # auto-creation: default.replication.factor
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> Topic:
        """Placed by `assign_replicas_to_brokers` over the live brokers (rack-aware
        where every broker has `broker.rack`), written to ZooKeeper; answered once
        this broker has applied the controller's first states (at most CREATE_WAIT_S,
        after which the topic is reported with the leaders it has)."""
        validate_topic_name(name)
        overrides = dict(configs or {})
        if num_partitions == -1:
            num_partitions = self.default_partitions
        if replication_factor == -1:
            replication_factor = self.config.log.default_replication_factor
        # The name, partition count and configs; the replication factor is placement's.
        self._check_new_topic(name, num_partitions, 1, overrides)
        try:
            placement = assign_replicas_to_brokers(self._live(), num_partitions, replication_factor)
        except RackInformationIncomplete as exc:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from exc
        if validate_only:
            return self._planned_topic(name, num_partitions, overrides)
        await self._write_topic(name, TopicAssignment(name, placement), overrides)

        def created(image: HostsImage) -> bool:
            topic = image.get(name)
            return topic is not None and len(topic.states) == num_partitions

        with trio.move_on_after(CREATE_WAIT_S):
            await self.applied.wait_value(created)
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, f"topic {name!r} written, not yet seen in ZooKeeper"
            )
        logger.info("created topic %s with %d partitions: %s", name, num_partitions, placement)
        return topic

    async def _write_topic(
        self, name: str, assignment: TopicAssignment, overrides: Mapping[str, str]
    ) -> None:
        document = json.loads(assignment.encode())
        document.update(version=3, topic_id=encode_topic_id(uuid.uuid4()))
        config = json.dumps({"version": 1, "config": dict(overrides)}).encode()
        try:
            await self._zookeeper.ensure_path(TOPIC_CONFIG_PATH)
            await self._zookeeper.ensure_path(TOPICS_PATH)
            if await self._zookeeper.get(topic_path(name)) is not None:
                raise NodeExistsError(topic_path(name))
            try:
                await self._zookeeper.create(topic_config_path(name), config)
            except NodeExistsError:  # left by a creation that stopped half-way
                await self._zookeeper.set(topic_config_path(name), config)
            await self._zookeeper.create(topic_path(name), json.dumps(document).encode())
        except NodeExistsError:
            raise KafkaError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists"
            ) from None
        except CoordinationUnavailable as exc:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper: {exc}") from exc

    async def delete_topic(self, name: str) -> None:
        """As Kafka 2.x: mark `/admin/delete_topics/<t>`; the controller deletes the
        topic's znodes and every broker its replicas' logs. Answered once this broker
        no longer has the topic (REQUEST_TIMED_OUT after CREATE_WAIT_S, the deletion
        going on)."""
        if not self.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        topic = self._known(name)
        async with _zookeeper_errors():
            await self._states.request_topic_deletion(name)
        await self._until_applied(
            lambda image: name not in image or image[name].topic_id != topic.topic_id,
            f"topic {name!r} marked for deletion, not yet deleted",
        )
        logger.info("deleted topic %s (%s)", name, topic.topic_id)

    async def create_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> None:
        """The added partitions placed by `assign_new_partitions` over the live brokers
        and racks, written into the topic's znode at the version read; the controller,
        watching it, writes their first states. Answered once this broker applied them."""
        self._known(name)
        async with _zookeeper_errors():
            node = await self._zookeeper.get(topic_path(name))
            if node is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
            assignment = TopicAssignment.decode(name, node.data)
            added = assign_new_partitions(self._live(), assignment.partitions, total)
            if validate_only:
                return
            document = json.loads(node.data)
            document["partitions"].update({str(p): list(r) for p, r in added.items()})
            try:
                await self._zookeeper.set(
                    topic_path(name), json.dumps(document).encode(), version=node.version
                )
            except BadVersionError:
                raise KafkaError(
                    ErrorCode.REASSIGNMENT_IN_PROGRESS, f"topic {name!r} changed meanwhile; retry"
                ) from None
        await self._until_applied(
            lambda image: name in image and len(image[name].states) >= total,
            f"partitions of {name!r} written, not yet all led",
        )
        logger.info("added partitions to %s: %s", name, added)

    async def alter_topic_configs(
        self,
        name: str,
        set_: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        replace_all: bool = False,
        validate_only: bool = False,
    ) -> None:
        """Written to `/config/topics/<t>`, which every broker watches; answered once this
        broker applied it."""
        topic = self._known(name)
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
        document = json.dumps({"version": 1, "config": dict(new)}).encode()
        async with _zookeeper_errors():
            try:
                await self._zookeeper.set(topic_config_path(name), document)
            except NoNodeError:  # a topic written by a tool that left no config
                await self._zookeeper.create(topic_config_path(name), document)
        await self._until_applied(
            lambda image: name in image and dict(image[name].configs) == dict(new),
            f"configs of {name!r} written, not yet applied",
        )

    def _known(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        return topic

    def _live(self) -> list[BrokerMetadata]:
        return [
            BrokerMetadata(node_id, registration.rack)
            for node_id, registration in self._live_brokers.value.items()
        ]

    async def _until_applied(self, done: Callable[[HostsImage], bool], late: str) -> None:
        with trio.move_on_after(CREATE_WAIT_S):
            await self.applied.wait_value(done)
            return
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, late)

    async def allocate_producer_id(self) -> int:
        """From blocks claimed in `/latest_producer_id_block`, as Kafka 2.x's brokers do,
        so no two brokers (nor one broker's successive transaction coordinators) ever
        hand out the same id."""
        async with _zookeeper_errors():
            try:
                return await self._zookeeper_producer_ids.allocate()
            except ValueError as exc:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc


@contextlib.asynccontextmanager
async def _zookeeper_errors() -> AsyncIterator[None]:
    try:
        yield
    except CoordinationUnavailable as exc:
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper: {exc}") from exc
    except MalformedZnode as exc:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc
