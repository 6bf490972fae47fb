"""A corrupt batch in a partition this broker leads is repaired from an in-sync replica.

The leader cannot serve the offsets a corrupt batch lost (found by a read, or left by
start-up's recovery: `PartitionLog.unreadable_from`), but every other ISR member has
its own copy. So it gives the partition up (`corrupt_leader_hand_off`): it writes the
partition's state znode itself, conditional on the zkVersion it read and keeping the
controller epoch, as its ISR changes are written, naming the first live ISR member in
replica order leader at the next leader epoch and leaving the ISR; then it announces
the change under `/isr_change_notification`, so the controller re-reads the state
(until then a write of the controller's fails on the zkVersion and re-reads it). The
brokers' watches move leadership; this broker, now a follower, truncates below the
corrupt batch and fetches the new leader's copy (broker/log/follower_log.py) and
rejoins the ISR once caught up.

Meanwhile Fetch answers NOT_LEADER_OR_FOLLOWER for the partition (`corrupt_read`), so
clients find the new leader instead of reporting an error; without another live ISR
member it answers CORRUPT_MESSAGE as a single host does (docs/corrupt-data.md).

Crash-safety: until the znode is written nothing changed (the corruption is found
again: by the next read, or by the recovery of an unclean restart); the write is one
conditional set; a lost notification only delays the controller's re-read.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

import trio
import trio_util

from broker.coordination.broker_registration import BrokerRegistration
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.store import BadVersionError, CoordinationStore, CoordinationUnavailable
from broker.hosts.partition_state_view import HostsImage
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.protocol.error_codes import ErrorCode
from broker.replication.corrupt_leader_hand_off import corrupt_leader_hand_off
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class CorruptReplicaRepair:
    def __init__(
        self,
        node_id: int,
        store: CoordinationStore,
        logs: ZooKeeperLogManager,
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
    ) -> None:
        self._node_id = node_id
        self._states = PartitionStateStore(store)
        self._logs = logs
        self._live = live_brokers
        self._requests_in, self._requests = trio.open_memory_channel[TopicPartition](math.inf)
        self._pending: set[TopicPartition] = set()
        # Partitions whose corruption no replica can repair, by the leader epoch reported.
        self._alone: dict[TopicPartition, int] = {}

    def corrupt_read(self, topic: str, partition: int) -> ErrorCode:
        """A read of a partition led here met a corrupt batch (Fetch's answer)."""
        tp = TopicPartition(topic, partition)
        if self._hand_off(tp, self._logs.applied.value) is None:
            return ErrorCode.CORRUPT_MESSAGE
        self._request(tp)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hand-offs one at a time; every applied view checks the partitions led here
        for a corruption start-up found (a read reports its own through `corrupt_read`)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._hand_offs)
            task_status.started()
            async for image in self._logs.applied.eventual_values():
                self._check_led(image)

    def _check_led(self, image: HostsImage) -> None:
        for name, topic in image.items():
            for index, state in topic.states.items():
                tp = TopicPartition(name, index)
                partition_log = self._logs.replica_log(name, index)
                if state.leader != self._node_id or partition_log is None:
                    continue
                unreadable = partition_log.unreadable_from
                if unreadable is None:
                    continue
                if self._hand_off(tp, image) is not None:
                    self._request(tp)
                elif self._alone.get(tp) != state.leader_epoch:
                    self._alone[tp] = state.leader_epoch
                    log.error(
                        "%s: offsets from %d are lost to a corrupt batch and no other live "
                        "in-sync replica holds them: served as on a single host",
                        tp,
                        unreadable,
                    )

    def _hand_off(self, tp: TopicPartition, image: HostsImage) -> LeaderAndIsr | None:
        topic = image.get(tp.topic)
        state = None if topic is None else topic.states.get(tp.partition)
        if topic is None or state is None:
            return None
        replicas = topic.assignment.partitions.get(tp.partition, ())
        return corrupt_leader_hand_off(self._node_id, replicas, state, self._live.value)

    def _request(self, tp: TopicPartition) -> None:
        if tp not in self._pending:
            self._pending.add(tp)
            self._requests_in.send_nowait(tp)

    async def _hand_offs(self) -> None:
        async for tp in self._requests:
            try:
                await self._write_hand_off(tp)
            except (BadVersionError, CoordinationUnavailable) as exc:
                # The state changed meanwhile, or ZooKeeper is away: the next read of the
                # corrupt batch, or the next view, asks again.
                log.warning("%s: leadership not handed off yet: %s", tp, exc)
            finally:
                self._pending.discard(tp)

    async def _write_hand_off(self, tp: TopicPartition) -> None:
        stored = await self._states.partition_state(tp)
        image = self._logs.applied.value
        topic = image.get(tp.topic)
        if stored is None or topic is None:
            return
        replicas = topic.assignment.partitions.get(tp.partition, ())
        current = stored.leader_and_isr
        new = corrupt_leader_hand_off(self._node_id, replicas, current, self._live.value)
        if new is None:
            return  # no longer the leader, or nobody to take it
        await self._states.update_isr_as_leader(tp, new, stored.controller_epoch)
        partition_log = self._logs.replica_log(tp.topic, tp.partition)
        unreadable = None if partition_log is None else partition_log.unreadable_from
        log.error(
            "%s: corrupt batch from offset %s: leadership handed to broker %d (leader epoch "
            "%d), an in-sync replica with its own copy; this replica truncates there and "
            "fetches the rest from it",
            tp,
            unreadable,
            new.leader,
            new.leader_epoch,
        )
        try:
            await self._states.propagate_isr_changes([tp])
        except CoordinationUnavailable as exc:
            log.warning("%s: ISR change notification not written: %s", tp, exc)
