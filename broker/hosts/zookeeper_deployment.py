"""A broker among hosts coordinated through ZooKeeper: its `Deployment`.

The composition root (`broker/__main__.py`) makes one when `zookeeper.connect` is set
and the broker runs as one process. One ZooKeeper session (`KazooCoordinationStore`)
serves everything: the membership (registration, live brokers, controller election),
the `PartitionStateView` the topology and the log read, the `KafkaController`,
which acts while this broker is elected, the replica fetchers (appends only), and
`__consumer_offsets`-0 and `__transaction_state`-0, where the group and transaction
coordinators keep their state. Brokers learn leadership by watching the
state znodes, so the controller's LeaderAndIsr / UpdateMetadata requests are not
sent (`WatchingBrokers`; docs/replication.md says why). A process of a host's
supervisor (`metrics_socket` given) serves its /metrics to the supervisor alone, which
serves the host's one HTTP port, as a process of the one-host cluster does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from broker.broker_context import BrokerContext, Service
from broker.config import BrokerConfig
from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.cluster_id import (
    CLUSTER_ID_PATH,
    InconsistentClusterId,
    check_stored_cluster_id,
    decode_cluster_id,
    encode_cluster_id,
)
from broker.coordination.controller_election import ControllerElection
from broker.coordination.kafka_controller import KafkaController
from broker.coordination.kazoo_store import (
    KazooCoordinationStore,
    ZooKeeperSettings,
    get_or_create_blocking,
)
from broker.coordination.live_brokers import LiveBrokers
from broker.coordination.membership import ClusterMembership
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.controlled_shutdown import ControlledShutdownHandler
from broker.hosts.broker_peers import BrokerPeers
from broker.hosts.consumer_offsets_partition import ConsumerOffsetsPartition
from broker.hosts.controlled_shutdown import ControlledShutdown, answer_controlled_shutdown
from broker.hosts.corrupt_replica_repair import CorruptReplicaRepair
from broker.hosts.inter_broker_security import BrokerConnector, InterBrokerSecurity
from broker.hosts.leader_elections import ZooKeeperLeaderElections
from broker.hosts.partition_leaders import PartitionLeaders
from broker.hosts.partition_reassignments import ZooKeeperReassignments
from broker.hosts.partition_state_view import PartitionStateView
from broker.hosts.replica_fetchers import ReplicaFetchers
from broker.hosts.replication_settings import (
    controlled_shutdown_settings,
    controller_settings,
    replica_fetcher_settings,
)
from broker.hosts.replication_throttles import ReplicationThrottles
from broker.hosts.zookeeper_acls import ZooKeeperAclStore
from broker.hosts.zookeeper_broker_configs import ZooKeeperBrokerConfigStore
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.hosts.zookeeper_quotas import ZooKeeperQuotaStore
from broker.hosts.zookeeper_scram_credentials import ZooKeeperScramCredentials
from broker.hosts.zookeeper_topology import ZooKeeperTopology
from broker.meta_properties import load_or_create_cluster_id, new_cluster_id, stored_cluster_id
from broker.metrics_http import LocalMetrics
from broker.net.internal_listener import InternalListener
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore
from broker.replication.broker_notifier import LeaderAndIsrRequest, UpdateMetadataRequest
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer
from broker.security.scram_credentials import CREDENTIALS_FILE, ScramCredentialStore
from broker.topology import Topology
from broker.transaction.replicated_transaction_log import TRANSACTION_STATE
from broker.wiring.cluster_membership import broker_registration, zookeeper_settings


class WatchingBrokers:
    """The controller's BrokerNotifier here: every broker follows the state znodes
    through watches, so there is nothing to send."""

    def send_leader_and_isr(self, broker_id: int, request: LeaderAndIsrRequest) -> None:
        return None

    def send_update_metadata(self, broker_id: int, request: UpdateMetadataRequest) -> None:
        return None


class ZooKeeperDeployment:
    def __init__(self, config: BrokerConfig, *, metrics_socket: Path | None = None) -> None:
        settings = zookeeper_settings(config)
        if settings is None:
            raise ValueError("a ZooKeeper deployment needs zookeeper.connect")
        self._config = config
        self._metrics_socket = metrics_socket
        self._node_id = config.node_id
        inter_broker = InterBrokerSecurity.from_config(config)  # ConfigError before ZooKeeper
        self._log_dir = Path(config.log_dirs[0])
        self.cluster_id = self._cluster_id(settings)
        self.store = KazooCoordinationStore(settings)
        self.live_brokers = LiveBrokers(self.store)
        self.connector = BrokerConnector(inter_broker, self.live_brokers.brokers)
        self.election = ControllerElection(self.store, self._node_id)
        self.partition_states = PartitionStateView(self.store)
        self.log_manager = ZooKeeperLogManager(
            config, self._node_id, self.store, self.partition_states, self.live_brokers.brokers
        )
        self.corrupt_replicas = CorruptReplicaRepair(
            self._node_id, self.store, self.log_manager, self.live_brokers.brokers
        )
        self.throttles = ReplicationThrottles(config, self._node_id, self._topic_config)
        self.replication = PartitionLeaders(
            config, self.store, self.log_manager, self.corrupt_replicas, self.throttles.leader
        )
        self.leader_elections = ZooKeeperLeaderElections(
            self.store, self.log_manager.applied, self.live_brokers.brokers
        )
        self.partition_reassignments = ZooKeeperReassignments(
            self.store, self.log_manager.applied, self.live_brokers.brokers
        )
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
            self.connector,
            self.log_manager.applied,
            self.log_manager.replica_log,
            self.live_brokers.brokers,
            replica_fetcher_settings(config),
            self.throttles.follower,
            num_fetchers=config.replication.num_replica_fetchers,
        )
        self.controlled_shutdown = ControlledShutdown(
            self._node_id,
            self.connector,
            self.controller,
            self.election.view,
            self.live_brokers.brokers,
            self.replication.leading_alone,
            self.replica_fetchers,
            controlled_shutdown_settings(config),
        )
        self.group_metadata_partition = ConsumerOffsetsPartition(
            config, self.log_manager, self.replication, self.live_brokers.brokers
        )
        self.transaction_state_partition = ConsumerOffsetsPartition(
            config,
            self.log_manager,
            self.replication,
            self.live_brokers.brokers,
            topic=TRANSACTION_STATE,
            replication_factor=config.transactions.state_log_replication_factor,
            min_insync=config.transactions.state_log_min_isr,
        )
        self.peers = BrokerPeers(self._node_id, self.connector)
        self.credentials = ZooKeeperScramCredentials(self._log_dir / CREDENTIALS_FILE, self.store)
        self._acls: ZooKeeperAclStore | None = None
        self.quotas = ZooKeeperQuotaStore(self._log_dir, self.store)
        self.broker_configs = ZooKeeperBrokerConfigStore(self._log_dir, self.store, self._node_id)
        self._topology = ZooKeeperTopology(
            self._node_id,
            self.live_brokers.brokers,
            self.election.view,
            self.partition_states,
            self.group_metadata_partition.want_topic,
            want_transaction_topic=self.transaction_state_partition.want_topic,
            peers=self.peers,
        )
        self.group_journal_dir = self._log_dir
        self.transaction_journal_dir = self._log_dir
        # Other brokers may be starting too: their partitions' markers must not hold ours.
        self.complete_transactions_before_serving = False

    def _cluster_id(self, settings: ZooKeeperSettings) -> str:
        """`/cluster/id`, created by the first broker, written into `meta.properties`
        (which the server reads); InconsistentClusterId if that names another cluster."""
        stored = stored_cluster_id(self._log_dir)
        proposed = stored or self._config.server.cluster_id or new_cluster_id()
        found = get_or_create_blocking(settings, CLUSTER_ID_PATH, encode_cluster_id(proposed))
        try:
            cluster_id = decode_cluster_id(found)
        except MalformedZnode as exc:
            raise InconsistentClusterId(str(exc)) from exc
        check_stored_cluster_id(stored, cluster_id)
        return load_or_create_cluster_id(self._log_dir, self._node_id, cluster_id)

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

    def scram_credentials(self) -> ScramCredentialStore:
        """`/config/users` in ZooKeeper, followed by a service of `services()`."""
        return self.credentials

    def quota_store(self) -> QuotaStore:
        """The client quotas in `/config`, followed by a service of `services()`."""
        return self.quotas

    def broker_config_store(self) -> DynamicBrokerConfigStore:
        """`/config/brokers` in ZooKeeper, followed by a service of `services()`."""
        return self.broker_configs

    def acl_store(self, authorizer: Authorizer) -> AclStore:
        """The `/kafka-acl` znodes, followed by a service of `services()`."""
        if self._acls is None:
            self._acls = ZooKeeperAclStore(self._log_dir, self.store, authorizer)
        return self._acls

    def metrics_port(
        self, metrics: LocalMetrics, bootstrap: Callable[[str], str | None]
    ) -> Service | None:
        if self._metrics_socket is not None:
            from broker.console.web_app import private_metrics_port

            return private_metrics_port(metrics, self._metrics_socket)
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
        first service), the controller, the partition leaders, the replica fetchers,
        the group and transaction coordinators' partitions, the repair of corrupt
        batches from in-sync replicas, the connections to other brokers with the
        KIP-890 verifiers' senders, and the reassignment throttles following the
        dynamic broker configs; the controller answers ControlledShutdown."""
        context.apis.add_handler(
            ControlledShutdownHandler(partial(answer_controlled_shutdown, self.controller))
        )
        context.metrics.gauge(
            "kafka.server",
            "ReplicaFetcherManager",
            "FailedPartitionsCount",
            self.replica_fetchers.failed_partitions_count,
            clientId="Replica",
        )
        acls: list[Service] = [] if self._acls is None else [self._acls]
        return [
            self.credentials,
            *acls,
            self.quotas.following(quotas),
            self.broker_configs.following(broker_configs),
            self.throttles.following(broker_configs, self.replica_fetchers.throttle_changed),
            self.partition_states,
            self.controller,
            self.replication,
            self.replica_fetchers,
            self.corrupt_replicas,
            self.group_metadata_partition,
            self.transaction_state_partition,
            self.peers,
            *self._topology.services(),
        ]
