"""ElectLeaders on hosts coordinated through ZooKeeper: ask the controller, wait for it.

The broker asked writes the partitions to `/admin/preferred_replica_election` (Kafka
2.x's znode, so `kafka-preferred-replica-election.sh --zookeeper` works too) or to
`/admin/unclean_leader_election`; the controller, watching them, elects and deletes
the request. The answer comes from the partition states this broker applies: NONE
once the expected leader leads, REQUEST_TIMED_OUT at the request's timeout.
Partitions with nothing to elect are answered at once, as Kafka answers them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import trio
import trio_util

from broker.coordination.broker_registration import BrokerRegistration
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.partition_state_znodes import (
    PREFERRED_REPLICA_ELECTION_PATH,
    UNCLEAN_LEADER_ELECTION_PATH,
)
from broker.coordination.store import CoordinationStore, CoordinationUnavailable, NodeExistsError
from broker.handlers.elect_leaders import ElectionResult, ElectionType, TopicPartitionKey
from broker.hosts.partition_state_view import HostsImage
from broker.protocol.error_codes import ErrorCode
from broker.replication.topic_partition import TopicPartition

PENDING_REQUEST_POLL_S = 0.1
"""How often to look again while another broker's election request is pending."""


class ZooKeeperLeaderElections:
    def __init__(
        self,
        store: CoordinationStore,
        applied: trio_util.AsyncValue[HostsImage],
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
    ) -> None:
        """`applied` is the image this broker's log has applied."""
        self._states = PartitionStateStore(store)
        self._applied = applied
        self._live_brokers = live_brokers

    async def elect(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey], timeout_s: float
    ) -> dict[TopicPartitionKey, ElectionResult]:
        results: dict[TopicPartitionKey, ElectionResult] = {}
        pending: list[TopicPartitionKey] = []
        image, live = self._applied.value, set(self._live_brokers.value)
        for key in partitions:
            outcome = _judge(image, live, election_type, key)
            if outcome is None:
                pending.append(key)
            else:
                results[key] = outcome
        if not pending:
            return results
        path = (
            PREFERRED_REPLICA_ELECTION_PATH
            if election_type is ElectionType.PREFERRED
            else UNCLEAN_LEADER_ELECTION_PATH
        )
        with trio.move_on_after(timeout_s):
            await self._ask(path, [TopicPartition(t, p) for t, p in pending])
            await self._applied.wait_value(
                lambda now: all(self._elected(now, election_type, key) for key in pending)
            )
        now = self._applied.value
        for key in pending:
            if self._elected(now, election_type, key):
                results[key] = (ErrorCode.NONE, None)
            else:
                results[key] = (
                    ErrorCode.REQUEST_TIMED_OUT,
                    "The election did not complete in time.",
                )
        return results

    def _elected(
        self, image: HostsImage, election_type: ElectionType, key: TopicPartitionKey
    ) -> bool:
        topic = image.get(key[0])
        state = None if topic is None else topic.states.get(key[1])
        if topic is None or state is None:
            return False
        preferred = topic.assignment.partitions[key[1]][0]
        if election_type is ElectionType.PREFERRED and state.leader != preferred:
            return False
        return state.leader in self._live_brokers.value

    async def _ask(self, path: str, partitions: list[TopicPartition]) -> None:
        """One request at a time, as Kafka's znode allows: wait while another is pending."""
        while True:
            try:
                await self._states.request_leader_election(path, partitions)
                return
            except (NodeExistsError, CoordinationUnavailable):
                await trio.sleep(PENDING_REQUEST_POLL_S)


def _judge(
    image: HostsImage, live: set[int], election_type: ElectionType, key: TopicPartitionKey
) -> ElectionResult | None:
    """The answer without asking the controller, or None when it has to elect."""
    name, partition = key
    topic = image.get(name)
    state = None if topic is None else topic.states.get(partition)
    replicas = None if topic is None else topic.assignment.partitions.get(partition)
    if state is None or not replicas:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {name}-{partition} is unknown."
    if election_type is ElectionType.PREFERRED:
        preferred = replicas[0]
        if state.leader == preferred and preferred in live:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed"
        if preferred not in live or preferred not in state.isr:
            return (
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Failed to elect leader for partition {name}-{partition} under strategy"
                f" PreferredReplicaPartitionLeaderElectionStrategy: replica {preferred}"
                " is not live and in sync",
            )
        return None
    if state.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed"
    if not live.intersection(replicas):
        return (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"Failed to elect leader for partition {name}-{partition}: no replica is live",
        )
    return None
