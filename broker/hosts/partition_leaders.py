"""The partitions this broker leads, each with its `PartitionLeader` running (Kafka's
Partition.makeLeader and the ReplicaManager's follower tracking).

It follows what the log applied from ZooKeeper: a partition whose state names this
broker leader gets a `PartitionLeader` over the log's end and high watermark, kept
while the leader epoch stays, given up (`resign`) when leadership moves or the
controller's write beat the leader's. Followers' fetches come in through Fetch
(`ReplicaTracking`); each one that moves the high watermark sets it in the log, so
consumers read up to it (the ISR's smallest log end) and followers up to the log end.
Produce reports its appends and waits here for acks=all (`wait_for_acks`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs
import trio
import trio_util

from broker.config import BrokerConfig
from broker.coordination.partition_leader import PartitionLeader
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.store import CoordinationStore, CoordinationUnavailable
from broker.hosts.corrupt_replica_repair import CorruptReplicaRepair
from broker.hosts.partition_state_view import HostsImage
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.replication.partition_leader_state import LeaderSettings, PartitionLeaderState
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)


@attrs.frozen
class _Led:
    leader: PartitionLeader
    log: PartitionLog
    leader_epoch: int
    scope: trio.CancelScope


class PartitionLeaders:
    def __init__(
        self,
        config: BrokerConfig,
        store: CoordinationStore,
        logs: ZooKeeperLogManager,
        corrupt_replicas: CorruptReplicaRepair | None = None,
    ) -> None:
        """`corrupt_replicas` answers reads that met a corrupt batch (none: CORRUPT_MESSAGE)."""
        self._corrupt_replicas = corrupt_replicas
        self._node_id = config.node_id
        self._lag_time_max_ms = config.replication.replica_lag_time_max_ms
        self._states = PartitionStateStore(store)
        self._logs = logs
        self._led: dict[TopicPartition, _Led] = {}
        # What is led, at which leader epoch (the group coordinator's partition follows it).
        self.leading: trio_util.AsyncValue[Mapping[TopicPartition, int]] = trio_util.AsyncValue({})

    def leader(self, topic: str, partition: int) -> PartitionLeader | None:
        led = self._led.get(TopicPartition(topic, partition))
        return None if led is None else led.leader

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for image in self._logs.applied.eventual_values():
                await self._apply(image, nursery)

    # -- ReplicaTracking --
    def on_follower_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int
    ) -> ErrorCode:
        led = self._led.get(TopicPartition(topic, partition))
        if led is None:
            return ErrorCode.NONE  # not tracked yet (or not led here: the read answers)
        led.leader.on_append(led.log.log_end_offset)
        code = led.leader.on_follower_fetch(replica_id, fetch_offset)
        self._sync_high_watermark(led)
        return code

    def tracked(self, topic: str, partition: int) -> bool:
        return TopicPartition(topic, partition) in self._led

    def check_produce(self, topic: str, partition: int, required_acks: int) -> ErrorCode:
        led = self._led.get(TopicPartition(topic, partition))
        return ErrorCode.NONE if led is None else led.leader.check_produce(required_acks)

    def on_append(self, topic: str, partition: int) -> None:
        led = self._led.get(TopicPartition(topic, partition))
        if led is not None:
            led.leader.on_append(led.log.log_end_offset)
            self._sync_high_watermark(led)

    async def wait_for_acks(
        self, topic: str, partition: int, required_offset: int, timeout_s: float
    ) -> ErrorCode:
        led = self._led.get(TopicPartition(topic, partition))
        if led is None:  # leadership moved between the append and the wait
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return await led.leader.wait_for_acks_all(required_offset, timeout_s)

    def corrupt_read(self, topic: str, partition: int) -> ErrorCode:
        if self._corrupt_replicas is None:
            return ErrorCode.CORRUPT_MESSAGE
        return self._corrupt_replicas.corrupt_read(topic, partition)

    def _sync_high_watermark(self, led: _Led) -> None:
        if led.log.replicated_high_watermark != led.leader.state.high_watermark:
            led.log.update_high_watermark(led.leader.state.high_watermark)

    # -- leadership --
    async def _apply(self, image: HostsImage, nursery: trio.Nursery) -> None:
        wanted = {
            TopicPartition(name, index): state
            for name, topic in image.items()
            for index, state in topic.states.items()
            if state.leader == self._node_id
        }
        for tp, led in list(self._led.items()):
            state = wanted.get(tp)
            if (
                state is None
                or state.leader_epoch != led.leader_epoch
                or led.leader.conflict.is_set()
            ):
                self._resign(tp)
        for tp, state in wanted.items():
            if tp in self._led:
                continue
            partition_log = self._logs.replica_log(tp.topic, tp.partition)
            topic = image[tp.topic]
            if partition_log is None:
                continue
            try:
                stored = await self._states.partition_state(tp)
            except CoordinationUnavailable as exc:
                log.warning("%s: not tracking its followers yet: %s", tp, exc)
                continue
            if stored is None or stored.leader_and_isr.leader_epoch != state.leader_epoch:
                continue  # a newer state is on its way through the view
            settings = LeaderSettings(
                replica_lag_time_max_ms=self._lag_time_max_ms,
                min_insync_replicas=self._min_insync_replicas(tp.topic),
            )
            leader_state = PartitionLeaderState(
                tp,
                self._node_id,
                topic.assignment.partitions[tp.partition],
                stored.leader_and_isr,
                log_end_offset=partition_log.log_end_offset,
                high_watermark=partition_log.high_watermark,
                now=trio.current_time(),
                settings=settings,
            )
            leader = PartitionLeader(leader_state, stored.controller_epoch, self._states)
            led = _Led(leader, partition_log, state.leader_epoch, trio.CancelScope())
            self._led[tp] = led
            self._sync_high_watermark(led)
            nursery.start_soon(self._run_leader, led)
        self.leading.value = {tp: led.leader_epoch for tp, led in self._led.items()}

    def _min_insync_replicas(self, topic: str) -> int:
        found = self._logs.topic(topic)
        return 1 if found is None else int(found.config("min.insync.replicas"))

    def _resign(self, tp: TopicPartition) -> None:
        led = self._led.pop(tp)
        led.leader.resign()
        led.scope.cancel()

    async def _run_leader(self, led: _Led) -> None:
        with led.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(led.leader.run)
                while True:  # appends that do not come through Produce (markers)
                    await led.log.data_appended().wait()
                    led.leader.on_append(led.log.log_end_offset)
                    self._sync_high_watermark(led)
