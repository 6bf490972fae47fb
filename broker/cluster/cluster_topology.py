"""The `Topology` of one process of a cluster on one host (docs/cluster.md).

Brokers, leaders and liveness come from the shared metadata store as this process's
log last applied it (`ClusterLogManager.image`); groups and transactional ids belong
to the process `abs(javaHashCode(key)) % N`; markers for partitions and groups of
other processes, and Produce's verification of another process's transactions,
travel over the private channel (broker/cluster/peer_channel.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from broker.broker_context import Service
from broker.cluster.cluster_image import ClusterImage
from broker.cluster.peer_channel import PeerClient
from broker.cluster.placement import coordinator_shard
from broker.log.partition_log import PartitionLog
from broker.remote_partition import RemotePartition
from broker.topology import (
    BrokerAddress,
    LocalMarkers,
    MarkerWriter,
    PartitionLeader,
)
from broker.topology import (
    TransactionVerifier as VerifyPartition,
)
from broker.transaction.marker_router import RoutingMarkerWriter
from broker.transaction.txn_verification import TransactionVerifier, VerificationGuards


class ClusterLog(Protocol):
    """What the topology reads of this process's log (a `ClusterLogManager`): the
    store's image it last applied, and the partitions it placed."""

    @property
    def node_id(self) -> int: ...

    @property
    def image(self) -> ClusterImage: ...

    def partition(self, topic: str, partition: int) -> PartitionLog | None: ...


class ClusterTopology:
    def __init__(
        self,
        log_manager: ClusterLog,
        *,
        process_index: int,
        process_count: int,
        peer_dir: Path,
    ) -> None:
        self._logs = log_manager
        self._node_id = log_manager.node_id
        self._index = process_index
        self._count = process_count
        self._base_node_id = self._node_id - process_index
        self._peer_dir = peer_dir
        # Positive verification answers, kept until the partition's next marker.
        self._guards = VerificationGuards()
        self._verifiers: list[TransactionVerifier] = []

    @property
    def image(self) -> ClusterImage:
        return self._logs.image

    @property
    def node_id(self) -> int:
        return self._node_id

    def brokers(self, listener_name: str) -> list[BrokerAddress]:
        result = []
        for broker in self.image.alive_brokers():
            endpoint = broker.endpoints.get(listener_name)
            if endpoint is not None:
                result.append((broker.node_id, *endpoint))
        return result

    def registered_brokers(self) -> int:
        """The live processes, as Metadata lists them (Kafka's registered brokers)."""
        return len(self.image.alive_brokers())

    def max_replication_factor(self) -> int:
        return 1

    def rack(self, node_id: int) -> str | None:
        return None

    def controller_id(self) -> int:
        """The lowest live node: the store serialises writes, any process may write."""
        alive = self.image.alive_brokers()
        return alive[0].node_id if alive else self._node_id

    def group_shard(self, key: str) -> int:
        return coordinator_shard(key, self._count)

    def coordinator_node(self, key: str, *, transaction: bool = False) -> int:
        """Transactional ids are placed by the groups' rule (Kafka hashes both onto
        the partitions of their topic, `__transaction_state` and `__consumer_offsets`)."""
        return self._base_node_id + self.group_shard(key)

    def locate_coordinator(
        self, key: str, listener_name: str, *, transaction: bool = False
    ) -> BrokerAddress | None:
        node = self.coordinator_node(key)
        if not self.image.is_alive(node):
            return None
        endpoint = self.image.endpoint(node, listener_name)
        return None if endpoint is None else (node, *endpoint)

    def owns_group(self, group_id: str) -> bool:
        return self.coordinator_node(group_id) == self._node_id

    def owns_transaction(self, transactional_id: str) -> bool:
        return self.coordinator_node(transactional_id) == self._node_id

    def owns_group_shard(self, shard: int) -> bool:
        return shard == self._index

    def leader_of(self, topic: str, partition: int) -> int | None:
        found = self.image.topics.get(topic)
        if found is None or not 0 <= partition < len(found.leaders):
            return None
        return found.leaders[partition]

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        """The leader this process's log placed (a `RemotePartition` names it); a
        leader that is down is offline, as Kafka reports an offline partition."""
        log = self._logs.partition(topic, partition)
        leader = log.leader if isinstance(log, RemotePartition) else self._node_id
        return PartitionLeader(leader, online=self.image.is_alive(leader))

    def is_local_leader(self, topic: str, partition: int) -> bool:
        return not isinstance(self._logs.partition(topic, partition), RemotePartition)

    def on_marker(self, producer_id: int, topic: str, index: int) -> None:
        """A marker for the partition: the producer's transaction there has ended."""
        self._guards.invalidate(producer_id, (topic, index))

    def transaction_verifier(self, local: VerifyPartition) -> TransactionVerifier:
        """Asks the coordinator process of the producer's transactional id; a broker
        `Service` (its senders run in its nursery), listed by `services()`."""
        verifier = TransactionVerifier(
            PeerClient(self._peer_dir, self._node_id),
            my_node=self._node_id,
            coordinator_node=self.coordinator_node,
            local=local,
            guards=self._guards,
        )
        self._verifiers.append(verifier)
        return verifier

    def route_markers(self, local: LocalMarkers) -> MarkerWriter:
        """Markers to the leading processes over the private channel."""
        return RoutingMarkerWriter(
            local,
            PeerClient(self._peer_dir, self._node_id),
            my_node=self._node_id,
            leader_of=self.leader_of,
            group_shard=self.group_shard,
            base_node=self._base_node_id,
        )

    def services(self) -> list[Service]:
        """What runs as long as the broker: the verifiers' senders."""
        return list(self._verifiers)
