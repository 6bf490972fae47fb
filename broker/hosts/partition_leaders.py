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
import math
from collections.abc import Mapping

import attrs
import trio
import trio_util

from broker.config import BrokerConfig
from broker.coordination.partition_leader import PartitionLeader
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.partition_state_znodes import LeaderIsrAndControllerEpoch
from broker.coordination.store import CoordinationStore, CoordinationUnavailable
from broker.hosts.corrupt_replica_repair import CorruptReplicaRepair
from broker.hosts.partition_state_view import HostsImage
from broker.hosts.replication_settings import leader_settings
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.replication.partition_leader_state import PartitionLeaderState
from broker.replication.replication_quota import ReplicationQuotaManager, unthrottled
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

# After ZooKeeper failed the read of a state to lead, how long before trying again.
RETRY_S = 1.0


@attrs.frozen
class _Led:
    leader: PartitionLeader
    log: PartitionLog
    leader_epoch: int
    scope: trio.CancelScope
    # Set when the leadership goes on here at the next leader epoch (the controller
    # changed only the ISR, or rewrote the state after a conflict): the produces waiting
    # for acks=all wait on the rebuilt leader instead of answering NOT_LEADER_OR_FOLLOWER.
    renewed: trio.Event = attrs.field(factory=trio.Event)


class PartitionLeaders:
    def __init__(
        self,
        config: BrokerConfig,
        store: CoordinationStore,
        logs: ZooKeeperLogManager,
        corrupt_replicas: CorruptReplicaRepair | None = None,
        throttle: ReplicationQuotaManager | None = None,
    ) -> None:
        """`corrupt_replicas` answers reads that met a corrupt batch (none: CORRUPT_MESSAGE);
        `throttle` is the leader's reassignment throttle (none: unthrottled)."""
        self._corrupt_replicas = corrupt_replicas
        self._throttle = throttle if throttle is not None else unthrottled()
        self._node_id = config.node_id
        self._config = config
        self._states = PartitionStateStore(store)
        self._logs = logs
        self._led: dict[TopicPartition, _Led] = {}
        # What is led, at which leader epoch (the group coordinator's partition follows it).
        self.leading: trio_util.AsyncValue[Mapping[TopicPartition, int]] = trio_util.AsyncValue({})
        # One more at each change of what is led here.
        self._led_changes = trio_util.AsyncValue(0)
        # What the latest image applied says this broker leads.
        self._wanted: frozenset[TopicPartition] = frozenset()
        # Each wake-up re-applies the latest image: a new one, a leader's lost write.
        self._wakeups_in, self._wakeups = trio.open_memory_channel[None](math.inf)

    def leader(self, topic: str, partition: int) -> PartitionLeader | None:
        led = self._led.get(TopicPartition(topic, partition))
        return None if led is None else led.leader

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow_images)
            task_status.started()
            async for _wakeup in self._wakeups:
                while True:  # several wake-ups ask for one application of the latest
                    try:
                        self._wakeups.receive_nowait()
                    except trio.WouldBlock:
                        break
                await self._apply(self._logs.applied.value, nursery)

    async def _follow_images(self) -> None:
        async for _image in self._logs.applied.eventual_values():
            self._wakeups_in.send_nowait(None)

    async def leading_alone(self) -> None:
        """Returns once every partition led here has no other replica (a controlled
        shutdown moved the others' leadership, and their waiting produces answered)."""
        await self._led_changes.wait_value(
            lambda _: all(len(led.leader.state.replicas) <= 1 for led in self._led.values())
        )

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

    def throttle_replica_fetch(self, topic: str, partition: int, replica_id: int) -> bool:
        tp = TopicPartition(topic, partition)
        led = self._led.get(tp)
        in_sync = led is None or replica_id in led.leader.state.isr
        return self._throttle.should_throttle(tp, in_sync, trio.current_time())

    def replica_bytes_sent(self, topic: str, partition: int, size: int) -> None:
        tp = TopicPartition(topic, partition)
        if size and self._throttle.is_throttled(tp):
            self._throttle.record(size, trio.current_time())

    def tracked(self, topic: str, partition: int) -> bool:
        """Every partition here is replicated through ZooKeeper: one whose log is local
        before its leader runs (the states applied, the leader not built yet) must not
        take an acks=all produce as if it had no followers."""
        return True

    def check_produce(self, topic: str, partition: int, required_acks: int) -> ErrorCode:
        led = self._led.get(TopicPartition(topic, partition))
        if led is None:  # leadership is arriving or leaving: the client asks again
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return led.leader.check_produce(required_acks)

    def on_append(self, topic: str, partition: int) -> None:
        led = self._led.get(TopicPartition(topic, partition))
        if led is not None:
            led.leader.on_append(led.log.log_end_offset)
            self._sync_high_watermark(led)

    async def wait_for_acks(
        self, topic: str, partition: int, required_offset: int, timeout_s: float
    ) -> ErrorCode:
        tp = TopicPartition(topic, partition)
        deadline = trio.current_time() + timeout_s
        led = self._led.get(tp)
        while led is not None:  # None: leadership moved between the append and the wait
            remaining_s = max(0.0, deadline - trio.current_time())
            code = await led.leader.wait_for_acks_all(required_offset, remaining_s)
            if code != ErrorCode.NOT_LEADER_OR_FOLLOWER or not led.renewed.is_set():
                return code
            led = await self._rebuilt(tp, deadline)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    async def _rebuilt(self, tp: TopicPartition, deadline: float) -> _Led | None:
        """The leader built again for a renewed leadership (None if it is not by the
        deadline, or the partition is no longer led here)."""
        with trio.move_on_at(deadline):
            await self._led_changes.wait_value(lambda _: tp in self._led or tp not in self._wanted)
        return self._led.get(tp)

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
        self._wanted = frozenset(wanted)
        # A leader whose ISR write lost reads the state again: the image may not hold
        # the winning write yet.
        conflicted = set()
        # The leader goes on here (the next epoch, or rebuilt after a conflict): the
        # followers' fetch state it knew.
        kept: dict[TopicPartition, PartitionLeaderState] = {}
        for tp, led in list(self._led.items()):
            state = wanted.get(tp)
            if (
                state is None
                or state.leader_epoch != led.leader_epoch
                or led.leader.conflict.is_set()
            ):
                if state is not None and state.leader_epoch in (
                    led.leader_epoch,
                    led.leader_epoch + 1,
                ):
                    led.renewed.set()  # no other leader in between: the log is the same
                    kept[tp] = led.leader.state
                if led.leader.conflict.is_set():
                    conflicted.add(tp)
                self._resign(tp)
            else:  # the same leadership: the replicas may have changed beside it
                assignment = image[tp.topic].assignment
                replicas = assignment.partitions.get(tp.partition)
                if replicas is not None:
                    led.leader.state.assignment_changed(
                        replicas,
                        assignment.removing_replicas.get(tp.partition, ()),
                        trio.current_time(),
                    )
        for tp, state in wanted.items():
            if tp in self._led:
                continue
            partition_log = self._logs.replica_log(tp.topic, tp.partition)
            topic = image[tp.topic]
            if partition_log is None:
                continue
            # Built from the image as it came, with no ZooKeeper read in between: Produce
            # answers NOT_LEADER_OR_FOLLOWER while a leader is not built, and librdkafka
            # backs off for hundreds of ms (a rolling restart's stall on the partitions
            # whose ISR a leaving follower left). A stale version only loses the next
            # ISR write (a conflict, read again).
            controller_epoch = topic.controller_epochs.get(tp.partition)
            stored: LeaderIsrAndControllerEpoch | None
            if controller_epoch is not None and tp not in conflicted:
                stored = LeaderIsrAndControllerEpoch(state, controller_epoch)
            else:
                try:
                    stored = await self._states.partition_state(tp)
                except CoordinationUnavailable as exc:
                    log.warning("%s: not tracking its followers yet: %s", tp, exc)
                    nursery.start_soon(self._wake_after, RETRY_S)
                    continue
            if stored is None or stored.leader_and_isr.leader_epoch != state.leader_epoch:
                continue  # a newer state is on its way through the view
            settings = leader_settings(self._config, self._min_insync_replicas(tp.topic))
            leader_state = PartitionLeaderState(
                tp,
                self._node_id,
                topic.assignment.partitions[tp.partition],
                stored.leader_and_isr,
                log_end_offset=partition_log.log_end_offset,
                high_watermark=partition_log.high_watermark,
                now=trio.current_time(),
                settings=settings,
                removing=topic.assignment.removing_replicas.get(tp.partition, ()),
            )
            if tp in kept:
                _keep_followers(leader_state, kept[tp])
            leader = PartitionLeader(leader_state, stored.controller_epoch, self._states)
            led = _Led(leader, partition_log, state.leader_epoch, trio.CancelScope())
            self._led[tp] = led
            log.info(
                "%s: leading at epoch %d, ISR %s, high watermark %d",
                tp,
                state.leader_epoch,
                list(stored.leader_and_isr.isr),
                leader_state.high_watermark,
            )
            self._sync_high_watermark(led)
            nursery.start_soon(self._run_leader, led)
        self.leading.value = {tp: led.leader_epoch for tp, led in self._led.items()}
        self._led_changes.value += 1

    def _min_insync_replicas(self, topic: str) -> int:
        found = self._logs.topic(topic)
        return 1 if found is None else int(found.config("min.insync.replicas"))

    def _resign(self, tp: TopicPartition) -> None:
        led = self._led.pop(tp)
        led.leader.resign()
        led.scope.cancel()

    async def _wake_after(self, delay_s: float) -> None:
        await trio.sleep(delay_s)
        self._wakeups_in.send_nowait(None)

    async def _rebuild_after_conflict(self, led: _Led) -> None:
        """The controller wrote the state first: re-read it and build again at once
        rather than at the view's next change."""
        await led.leader.conflict.wait()
        self._wakeups_in.send_nowait(None)

    async def _run_leader(self, led: _Led) -> None:
        with led.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(led.leader.run)
                nursery.start_soon(self._rebuild_after_conflict, led)
                while True:  # appends that do not come through Produce (markers)
                    await led.log.data_appended().wait()
                    led.leader.on_append(led.log.log_end_offset)
                    self._sync_high_watermark(led)


def _keep_followers(state: PartitionLeaderState, previous: PartitionLeaderState) -> None:
    """Kafka's makeLeader resets the followers' fetch state only for a new leader: kept
    across an epoch bump of the same leader (the controller took a leaving follower out
    of the ISR), the high watermark moves at once over the records the staying followers
    already hold, instead of waiting for each to fetch at the new epoch."""
    for broker_id, follower in previous.followers.items():
        if broker_id in state.followers:
            state.followers[broker_id] = follower
    state.on_append(state.log_end_offset)
