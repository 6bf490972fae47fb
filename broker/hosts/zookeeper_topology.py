"""The `Topology` of a broker among hosts coordinated through ZooKeeper.

Brokers, their racks and endpoints come from the registrations under
`/brokers/ids` (LiveBrokers' view), the controller from `/controller`
(ControllerElection's view), and partition leadership, replicas, ISR and leader
epochs from the partition-state znodes (`PartitionStateView`). Every answer is
read from those cached views, which ZooKeeper's watches keep current: no request
waits on ZooKeeper.

Groups are coordinated by the leader of `__consumer_offsets`-0, whose replicated log
holds the groups' state (docs/replication.md says why), transactional ids by the leader
of `__transaction_state`-0; the first look-up asks for the topic to be created. The
transaction coordinator's markers go to each partition's leader (WriteTxnMarkers to
other hosts, a group's to the groups' coordinator), and Produce's KIP-890 verification
asks the transaction coordinator on its host (AddPartitionsToTxn verify-only), through
the same routing and verification as the processes of one host use
(broker/transaction/marker_router.py, txn_verification.py) over `BrokerPeers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import trio_util

from broker.broker_context import Service
from broker.coordination.broker_registration import BrokerRegistration
from broker.coordination.controller_election import ControllerView
from broker.coordinator.group_metadata_partition import CONSUMER_OFFSETS
from broker.hosts.broker_peers import BrokerPeers
from broker.hosts.partition_state_view import PartitionStateView
from broker.replication.leader_and_isr import NO_LEADER
from broker.topology import (
    BrokerAddress,
    LocalMarkers,
    MarkerWriter,
    PartitionLeader,
    TransactionVerifier,
)
from broker.transaction.marker_router import RoutingMarkerWriter
from broker.transaction.replicated_transaction_log import TRANSACTION_STATE
from broker.transaction.txn_verification import TransactionVerifier as RemoteVerifier
from broker.transaction.txn_verification import VerificationGuards

NO_CONTROLLER_ID = -1
"""Metadata's controller id while no broker holds `/controller`."""


class ZooKeeperTopology:
    def __init__(
        self,
        node_id: int,
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
        controller: trio_util.AsyncValue[ControllerView],
        partitions: PartitionStateView,
        want_offsets_topic: Callable[[], None],
        *,
        want_transaction_topic: Callable[[], None] = lambda: None,
        peers: BrokerPeers | None = None,
    ) -> None:
        """`want_offsets_topic` (`want_transaction_topic`) is called while
        `__consumer_offsets` (`__transaction_state`) does not exist; `peers` reach the
        other brokers (None: markers and verification stay on this broker)."""
        self._node_id = node_id
        self._live = live_brokers
        self._controller = controller
        self._partitions = partitions
        self._want_offsets_topic = want_offsets_topic
        self._want_transaction_topic = want_transaction_topic
        self._peers = peers
        self._guards = VerificationGuards()
        self._verifiers: list[RemoteVerifier] = []

    @property
    def node_id(self) -> int:
        return self._node_id

    def brokers(self, listener_name: str) -> list[BrokerAddress]:
        return [
            (node_id, endpoint.host, endpoint.port)
            for node_id, registration in sorted(self._live.value.items())
            for endpoint in registration.endpoints
            if endpoint.listener_name == listener_name
        ]

    def rack(self, node_id: int) -> str | None:
        registration = self._live.value.get(node_id)
        return None if registration is None else registration.rack

    def registered_brokers(self) -> int:
        return len(self._live.value)

    def max_replication_factor(self) -> int:
        return len(self._live.value)

    def controller_id(self) -> int:
        controller = self._controller.value.controller_id
        return controller if controller >= 0 else NO_CONTROLLER_ID

    def coordinator_node(self, key: str, *, transaction: bool = False) -> int:
        """The leader of `__consumer_offsets`-0, or of `__transaction_state`-0 for a
        transactional id (NO_LEADER while it has none or the topic is not created yet)."""
        topic = TRANSACTION_STATE if transaction else CONSUMER_OFFSETS
        state = self._partitions.partition(topic, 0)
        if state is None:
            if self._partitions.replicas(topic, 0) is None:
                want = self._want_transaction_topic if transaction else self._want_offsets_topic
                want()
            return NO_LEADER
        return state.leader

    def _transaction_node(self, transactional_id: str) -> int:
        return self.coordinator_node(transactional_id, transaction=True)

    def locate_coordinator(
        self, key: str, listener_name: str, *, transaction: bool = False
    ) -> BrokerAddress | None:
        node = self.coordinator_node(key, transaction=transaction)
        registration = self._live.value.get(node)
        if registration is None:
            return None
        for endpoint in registration.endpoints:
            if endpoint.listener_name == listener_name:
                return (node, endpoint.host, endpoint.port)
        return None

    def owns_group(self, group_id: str) -> bool:
        return self.coordinator_node(group_id) == self._node_id

    def owns_transaction(self, transactional_id: str) -> bool:
        return self._transaction_node(transactional_id) == self._node_id

    def owns_group_shard(self, shard: int) -> bool:
        """A group marker (WriteTxnMarkers to `__consumer_offsets`-0) is this broker's
        while it coordinates the groups."""
        return shard == 0 and self.owns_group("")

    def leader_of(self, topic: str, partition: int) -> int | None:
        state = self._partitions.partition(topic, partition)
        return None if state is None else state.leader

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        """As in ZooKeeper: a partition whose state the controller has not written
        yet, or whose leader is not live, is offline (LEADER_NOT_AVAILABLE)."""
        replicas = self._partitions.replicas(topic, partition)
        state = self._partitions.partition(topic, partition)
        if state is None:
            return PartitionLeader(NO_LEADER, online=False, replicas=replicas, isr=())
        online = state.leader != NO_LEADER and state.leader in self._live.value
        return PartitionLeader(
            state.leader,
            online=online,
            replicas=replicas,
            isr=state.isr,
            leader_epoch=state.leader_epoch,
        )

    def is_local_leader(self, topic: str, partition: int) -> bool:
        return self.leader_of(topic, partition) == self._node_id

    def on_marker(self, producer_id: int, topic: str, index: int) -> None:
        """A marker for the partition: the producer's transaction there has ended."""
        self._guards.invalidate(producer_id, (topic, index))

    def transaction_verifier(self, local: TransactionVerifier) -> TransactionVerifier:
        """Asks the transaction coordinator's broker; a `Service` (`services()`)."""
        if self._peers is None:
            return local
        verifier = RemoteVerifier(
            self._peers,
            my_node=self._node_id,
            coordinator_node=self._transaction_node,
            local=local,
            guards=self._guards,
        )
        self._verifiers.append(verifier)
        return verifier

    def route_markers(self, local: LocalMarkers) -> MarkerWriter:
        """Markers to the partitions' leaders, a group's to the groups' coordinator."""
        if self._peers is None:
            return local
        return RoutingMarkerWriter(
            local,
            self._peers,
            my_node=self._node_id,
            leader_of=self.leader_of,
            group_shard=lambda group: 0,
            group_node=self.coordinator_node,
        )

    def services(self) -> list[Service]:
        """What runs as long as the broker: the verifiers' senders."""
        return list(self._verifiers)
