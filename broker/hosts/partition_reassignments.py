"""AlterPartitionReassignments / ListPartitionReassignments on hosts coordinated
through ZooKeeper.

The targets are merged into `/admin/reassign_partitions` (Kafka's znode, so
`kafka-reassign-partitions.sh --zookeeper` reads the same), which the controller
follows (broker/coordination/controller_admin_requests.py, `partition_reassignment.py`): new
replicas are added, join the ISR once caught up, and the old ones are removed. What is
ongoing is read from the topic znodes' `adding_replicas` / `removing_replicas` as this
broker applied them. The answer to Alter comes once the request is written, as
Kafka's does, not once the replicas have moved. The znode is written at the version read
and read again on a conflict, so concurrent requests (on any broker) and the
controller's removals never undo one another.
"""

from __future__ import annotations

from collections.abc import Mapping

import trio_util

from broker.coordination.broker_registration import BrokerRegistration
from broker.coordination.partition_state_store import PartitionStateStore, Reassignment
from broker.coordination.store import CoordinationStore, CoordinationUnavailable
from broker.handlers.elect_leaders import ElectionResult, TopicPartitionKey
from broker.handlers.partition_reassignments import Ongoing
from broker.hosts.partition_state_view import HostsImage
from broker.protocol.error_codes import ErrorCode
from broker.replication.topic_partition import TopicPartition


class ZooKeeperReassignments:
    def __init__(
        self,
        store: CoordinationStore,
        applied: trio_util.AsyncValue[HostsImage],
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
    ) -> None:
        self._states = PartitionStateStore(store)
        self._applied = applied
        self._live_brokers = live_brokers

    async def alter(
        self, changes: Mapping[TopicPartitionKey, tuple[int, ...] | None]
    ) -> dict[TopicPartitionKey, ElectionResult]:
        ongoing = self.ongoing()
        results: dict[TopicPartitionKey, ElectionResult] = {}

        def merge(pending: dict[TopicPartition, tuple[int, ...]]) -> Reassignment:
            # Run again on each conflict, so the answers are those of the last read.
            results.clear()
            for key, target in changes.items():
                results[key] = self._merge_one(pending, ongoing, key, target)
            return pending

        try:
            await self._states.update_partition_reassignment(merge)
        except CoordinationUnavailable as exc:
            return {key: (ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper: {exc}") for key in changes}
        return results

    def _merge_one(
        self,
        pending: dict[TopicPartition, tuple[int, ...]],
        ongoing: Mapping[TopicPartitionKey, Ongoing],
        key: TopicPartitionKey,
        target: tuple[int, ...] | None,
    ) -> ElectionResult:
        tp = TopicPartition(*key)
        if target is None:
            if key not in ongoing and tp not in pending:
                return (
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    f"No reassignment of {key[0]}-{key[1]} is in progress.",
                )
            pending.pop(tp, None)
            return (ErrorCode.NONE, None)
        problem = self._invalid(target)
        if problem is not None:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        pending[tp] = target
        return (ErrorCode.NONE, None)

    def _invalid(self, target: tuple[int, ...]) -> str | None:
        if not target:
            return "The replica list is empty."
        if len(set(target)) != len(target):
            return f"The replica list {list(target)} contains duplicates."
        unknown = sorted(set(target) - set(self._live_brokers.value))
        if unknown:
            return f"The replica list names brokers that are not live: {unknown}."
        return None

    def ongoing(self) -> dict[TopicPartitionKey, Ongoing]:
        found: dict[TopicPartitionKey, Ongoing] = {}
        for name, topic in self._applied.value.items():
            assignment = topic.assignment
            for partition in set(assignment.adding_replicas) | set(assignment.removing_replicas):
                found[(name, partition)] = (
                    tuple(assignment.partitions.get(partition, ())),
                    tuple(assignment.adding_replicas.get(partition, ())),
                    tuple(assignment.removing_replicas.get(partition, ())),
                )
        return found
