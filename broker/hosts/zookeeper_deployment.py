"""A broker among hosts coordinated through ZooKeeper: its `Deployment`.

The composition root (`broker/__main__.py`) makes one when `zookeeper.connect` is set
and the broker runs as one process. One ZooKeeper session (`KazooCoordinationStore`)
serves everything: the membership (registration, live brokers, controller election),
the `PartitionStateView` the topology and the log read, the `KafkaController`,
which acts while this broker is elected, and the replica fetchers (appends only). Brokers learn leadership by watching the
state znodes, so the controller's LeaderAndIsr / UpdateMetadata requests are not
sent (`WatchingBrokers`; docs/replication.md says why).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from broker.broker_context import BrokerContext, Service
from broker.config import BrokerConfig
from broker.coordination.controller_election import ControllerElection
from broker.coordination.kafka_controller import KafkaController
from broker.coordination.kazoo_store import KazooCoordinationStore
from broker.coordination.live_brokers import LiveBrokers
from broker.coordination.membership import ClusterMembership
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.controlled_shutdown import ControlledShutdownHandler
from broker.hosts.controlled_shutdown import ControlledShutdown, answer_controlled_shutdown
from broker.hosts.partition_leaders import PartitionLeaders
from broker.hosts.partition_state_view import PartitionStateView
from broker.hosts.replica_fetchers import ReplicaFetchers
from broker.hosts.replication_settings import (
    controlled_shutdown_settings,
    controller_settings,
    replica_fetcher_settings,
)
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.hosts.zookeeper_topology import ZooKeeperTopology
from broker.metrics_http import LocalMetrics
from broker.net.internal_listener import InternalListener
from broker.quotas.quota_managers import QuotaManagers
from broker.replication.broker_notifier import LeaderAndIsrRequest, UpdateMetadataRequest
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer
from broker.security.scram_credentials import ScramCredentialStore
from broker.topology import Topology
from broker.wiring.cluster_membership import broker_registration, zookeeper_settings


class WatchingBrokers:
    """The controller's BrokerNotifier here: every broker follows the state znodes
    through watches, so there is nothing to send."""

    def send_leader_and_isr(self, broker_id: int, request: LeaderAndIsrRequest) -> None:
        return None

    def send_update_metadata(self, broker_id: int, request: UpdateMetadataRequest) -> None:
        return None


class ZooKeeperDeployment:
    def __init__(self, config: BrokerConfig) -> None:
        settings = zookeeper_settings(config)
        if settings is None:
            raise ValueError("a ZooKeeper deployment needs zookeeper.connect")
        self._config = config
        self._node_id = config.node_id
        self._log_dir = Path(config.log_dirs[0])
        self.store = KazooCoordinationStore(settings)
        self.live_brokers = LiveBrokers(self.store)
        self.election = ControllerElection(self.store, self._node_id)
        self.partition_states = PartitionStateView(self.store)
        self.log_manager = ZooKeeperLogManager(
            config, self._node_id, self.store, self.partition_states, self.live_brokers.brokers
        )
        self.replication = PartitionLeaders(config, self.store, self.log_manager)
        self.controller = KafkaController(
            self.store,
            self._node_id,
            self.election.view,
            self.live_brokers.brokers,
            WatchingBrokers(),
            controller_settings(config, self._topic_config),
        )
        self.replica_fetchers = ReplicaFetchers(
            self._node_id,
            config.network.inter_broker_listener_name,
            self.log_manager.applied,
            self.log_manager.replica_log,
            self.live_brokers.brokers,
            replica_fetcher_settings(config),
        )
        self.controlled_shutdown = ControlledShutdown(
            self._node_id,
            config.network.inter_broker_listener_name,
            self.controller,
            self.election.view,
            self.live_brokers.brokers,
            self.replication.leading_alone,
            self.replica_fetchers.stop,
            controlled_shutdown_settings(config),
        )
        self._topology = ZooKeeperTopology(
            self._node_id, self.live_brokers.brokers, self.election.view, self.partition_states
        )
        self.group_journal_dir = self._log_dir
        self.transaction_journal_dir = self._log_dir
        # Other brokers may be starting too: their partitions' markers must not hold ours.
        self.complete_transactions_before_serving = False

    def _topic_config(self, topic: str, key: str) -> str | None:
        found = self.log_manager.topic(topic)
        return None if found is None else found.config(key)

    def topology(self, advertised: Callable[[str], tuple[str, int]]) -> Topology:
        """ZooKeeper's view (this broker's own endpoints are in its registration)."""
        return self._topology

    def membership(
        self, context: BrokerContext, listening: Callable[[], Awaitable[object]]
    ) -> ClusterMembership:
        return ClusterMembership(
            self.store,
            self._node_id,
            broker_registration(context),
            listening,
            live_brokers=self.live_brokers,
            election=self.election,
            on_session_renewed=self.partition_states.session_renewed,
            leaving=self.controlled_shutdown.run,
        )

    def acl_store(self, authorizer: Authorizer) -> AclStore:
        return AclStore(self._log_dir)

    def metrics_port(
        self, metrics: LocalMetrics, bootstrap: Callable[[str], str | None]
    ) -> Service | None:
        from broker.console.console_service import http_port_for

        return http_port_for(self._config, metrics, bootstrap)

    def internal_listeners(self) -> tuple[InternalListener, ...]:
        return ()

    def services(
        self,
        context: BrokerContext,
        *,
        credentials: ScramCredentialStore,
        quotas: QuotaManagers,
        broker_configs: BrokerConfigs,
    ) -> list[Service]:
        """The partition states (ZooKeeper connected by then: the membership is the
        first service), the controller, the partition leaders and the replica fetchers;
        the controller answers ControlledShutdown."""
        context.apis.add_handler(
            ControlledShutdownHandler(partial(answer_controlled_shutdown, self.controller))
        )
        return [self.partition_states, self.controller, self.replication, self.replica_fetchers]
