"""Where things live among the brokers: the one seam between the broker's subsystems and
how brokers are deployed.

Handlers, coordinators and the log ask a `Topology` who the brokers are, which node
controls the cluster, which node coordinates a group or a transactional id, which node
leads a partition and whether that is this one; the transaction coordinator gets its
marker routing and Produce its KIP-890 verifier from it. The composition root
(`broker/__main__.py`, `broker/server.py`) builds one implementation before anything
else and passes it into constructors:

- `SingleProcessTopology` (here): one broker that is everything;
- `ClusterTopology` (`broker/cluster/cluster_topology.py`): one process of a cluster on
  one host, answers from the shared metadata store, markers and verification over the
  processes' private channel;
- issue 20's hosts coordinated through ZooKeeper are a third implementation
  (docs/replication.md).

This module is low in the package graph: it imports neither handlers nor the log nor
the cluster, so every layer may depend on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import attrs

BrokerAddress = tuple[int, str, int]
"""A broker as a client reaches it on one listener: (node id, host, port)."""

TopicPartition = tuple[str, int]

TransactionVerifier = Callable[[str | None, int, int, TopicPartition], Awaitable[int]]
"""KIP-890: (transactional id, producer id, epoch, partition) -> the error code of the
question "does this producer's open transaction hold the partition?"."""


@attrs.frozen
class PartitionLeader:
    """A partition's leader as Metadata reports it; `online` False while that broker is
    down (Kafka's offline leader: LEADER_NOT_AVAILABLE, leader -1). Where partitions
    are replicated, the replicas, the ISR and the leader epoch come with it (None:
    the leader is the only replica and the log's epoch is reported)."""

    node_id: int
    online: bool
    replicas: tuple[int, ...] | None = None
    isr: tuple[int, ...] | None = None
    leader_epoch: int | None = None


class MarkerWriter(Protocol):
    """Writes a finished transaction's COMMIT/ABORT markers (the transaction
    coordinator's side of Kafka's TransactionMarkerChannelManager)."""

    async def write_markers(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        groups: Iterable[str],
        coordinator_epoch: int = 0,
    ) -> None:
        """Append the COMMIT/ABORT marker to each partition (gone ones are skipped) and
        tell each group's coordinator, which commits or drops the offsets it holds
        for the producer; KafkaError when one cannot be written (the transaction stays
        prepared). `coordinator_epoch` fences a replaced coordinator's late markers."""
        ...


class LocalMarkers(MarkerWriter, Protocol):
    """Markers appended in this broker: to a partition it leads, to a group it
    coordinates (broker/transaction/marker_writer.py)."""

    async def write_partition_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        topic: str,
        index: int,
        coordinator_epoch: int = 0,
    ) -> None: ...

    async def write_group_marker(self, producer_id: int, epoch: int, commit: bool) -> None:
        """KafkaError when the group coordinator could not store it (replicated)."""
        ...


class Topology(Protocol):
    """What the broker's subsystems may ask about where things are."""

    @property
    def node_id(self) -> int:
        """This broker's node id."""
        ...

    def brokers(self, listener_name: str) -> list[BrokerAddress]:
        """Every live broker as Metadata and DescribeCluster list them, on a listener."""
        ...

    def registered_brokers(self) -> int:
        """How many brokers are registered (CreateTopics' replication-factor check)."""
        ...

    def max_replication_factor(self) -> int:
        """The most replicas a new partition may have (1 where partitions are not
        replicated; CreateTopics refuses more)."""
        ...

    def rack(self, node_id: int) -> str | None:
        """The broker's `broker.rack` as Metadata and DescribeCluster report it."""
        ...

    def controller_id(self) -> int: ...

    def coordinator_node(self, key: str, *, transaction: bool = False) -> int:
        """The node coordinating a group id or (`transaction`) a transactional id (one
        rule for both where Kafka hashes both onto the partitions of their internal
        topics; among hosts, the leaders of `__consumer_offsets` and
        `__transaction_state`)."""
        ...

    def locate_coordinator(
        self, key: str, listener_name: str, *, transaction: bool = False
    ) -> BrokerAddress | None:
        """FindCoordinator's answer for a group or (`transaction`) a transactional id;
        None while that node is down (COORDINATOR_NOT_AVAILABLE)."""
        ...

    def owns_group(self, group_id: str) -> bool:
        """Whether this broker coordinates the group (else NOT_COORDINATOR)."""
        ...

    def owns_transaction(self, transactional_id: str) -> bool: ...

    def owns_group_shard(self, shard: int) -> bool:
        """Whether the group-offset shard (`__consumer_offsets`-<shard> in a
        WriteTxnMarkers) is this broker's."""
        ...

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's assigned leader (None: no such partition), where markers go."""
        ...

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        """The leader of a partition this broker's log knows, as Metadata reports it."""
        ...

    def is_local_leader(self, topic: str, partition: int) -> bool:
        """Whether this broker's log holds the partition's data (its gauges are here)."""
        ...

    def on_marker(self, producer_id: int, topic: str, index: int) -> None:
        """Told of each marker before this broker appends it: a transaction verified
        there must be verified again."""
        ...

    def transaction_verifier(self, local: TransactionVerifier) -> TransactionVerifier:
        """Produce's verifier, given the question answered by this broker's own
        transaction coordinator."""
        ...

    def route_markers(self, local: LocalMarkers) -> MarkerWriter:
        """The transaction coordinator's markers, given how this broker appends its own."""
        ...


class SingleProcessTopology:
    """One broker: it leads every partition and coordinates every group and id."""

    def __init__(self, node_id: int, advertised: Callable[[str], tuple[str, int]]) -> None:
        self._node_id = node_id
        self._advertised = advertised
        self._leader = PartitionLeader(node_id, online=True)

    @property
    def node_id(self) -> int:
        return self._node_id

    def brokers(self, listener_name: str) -> list[BrokerAddress]:
        return [(self._node_id, *self._advertised(listener_name))]

    def registered_brokers(self) -> int:
        return 1

    def max_replication_factor(self) -> int:
        return 1

    def rack(self, node_id: int) -> str | None:
        return None

    def controller_id(self) -> int:
        return self._node_id

    def coordinator_node(self, key: str, *, transaction: bool = False) -> int:
        return self._node_id

    def locate_coordinator(
        self, key: str, listener_name: str, *, transaction: bool = False
    ) -> BrokerAddress | None:
        return (self._node_id, *self._advertised(listener_name))

    def owns_group(self, group_id: str) -> bool:
        return True

    def owns_transaction(self, transactional_id: str) -> bool:
        return True

    def owns_group_shard(self, shard: int) -> bool:
        return shard == 0

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self._node_id

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        return self._leader

    def is_local_leader(self, topic: str, partition: int) -> bool:
        return True

    def on_marker(self, producer_id: int, topic: str, index: int) -> None:
        return None

    def transaction_verifier(self, local: TransactionVerifier) -> TransactionVerifier:
        return local

    def route_markers(self, local: LocalMarkers) -> MarkerWriter:
        return local
