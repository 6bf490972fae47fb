"""One broker process's membership in the cluster: its `Deployment`.

The composition root (`broker/__main__.py`) makes a `ClusterMember` when the process
runs under the supervisor (`broker serve --process-index I`) and gives it to
`KafkaServer`, which builds everything from it: the log is a `ClusterLogManager`, the
topology a `ClusterTopology` (every live process in Metadata and DescribeCluster,
groups and transactional ids located by hash, markers and Produce verification over
the private channel), the ACLs a `SharedAclStore`, and the journals are the shard's.
It adds the services that follow the files the processes share and the private
channel's server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from broker.broker_context import BrokerContext, Service
from broker.broker_topic_stats import GROUP as TOPIC_METRICS_GROUP
from broker.broker_topic_stats import TYPE as TOPIC_METRICS_TYPE
from broker.cluster.cluster_log_manager import ClusterLogManager
from broker.cluster.cluster_metrics import metrics_socket
from broker.cluster.cluster_topology import ClusterTopology
from broker.cluster.group_shards import SHARDS as GROUP_SHARDS
from broker.cluster.metadata_store import SqliteMetadataStore
from broker.cluster.peer_channel import peer_listener
from broker.cluster.placement_load_report import LoadReporter
from broker.cluster.shard_layout import ShardLayout
from broker.cluster.shared_acls import SharedAclStore
from broker.cluster.shared_file import SharedFileFollower
from broker.cluster.transaction_shards import transaction_shard_dir
from broker.config import BrokerConfig
from broker.console.web_app import private_metrics_port
from broker.coordination.membership import ClusterMembership
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.elect_leaders import NO_ELECTIONS
from broker.handlers.partition_reassignments import NO_REASSIGNMENTS
from broker.handlers.replica_tracking import NO_REPLICATION
from broker.metrics_http import LocalMetrics
from broker.net.internal_listener import InternalListener
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer
from broker.security.scram_credentials import CREDENTIALS_FILE, ScramCredentialStore
from broker.topology import Topology
from broker.wiring.cluster_membership import add_cluster_membership

log = logging.getLogger(__name__)

PEER_SOCKET_DIR_KEY = "peer.socket.dir"
"""The metadata store's key for the directory of the processes' private sockets."""


async def stop_when_supervisor_exits(shutdown: Callable[[], None]) -> None:
    """The supervisor holds the write end of this process's stdin and never writes to it:
    end of file means it is gone, even killed with SIGKILL, so no broker process outlives
    it holding ports and partitions."""
    async with trio.lowlevel.FdStream(os.dup(0)) as stdin:
        while await stdin.receive_some(4096):
            pass
    log.warning("the supervisor is gone; shutting down")
    shutdown()


def shard_dir(log_dir: Path, shard: int) -> Path:
    """The directory of the group offsets of coordinator shard `shard`."""
    return ShardLayout(log_dir, GROUP_SHARDS).shard_dir(shard)


class ClusterMember:
    def __init__(self, config: BrokerConfig, process_index: int) -> None:
        self.config = config
        self.process_count = config.cluster.processes
        self.index = process_index
        self.node_id = config.node_id
        self.log_dir = Path(config.log_dirs[0])
        self.store = SqliteMetadataStore(self.log_dir)
        self.poll_interval_s = config.cluster.metadata_poll_interval_ms / 1000
        self.log_manager = ClusterLogManager(
            config, self.store, self.node_id, poll_interval_s=self.poll_interval_s
        )
        self.replication = NO_REPLICATION
        self.leader_elections = NO_ELECTIONS
        self.partition_reassignments = NO_REASSIGNMENTS
        peer_dir = self.store.get(PEER_SOCKET_DIR_KEY)
        # Set by the supervisor; a short path, as Unix socket paths are (108 bytes).
        self.peer_dir = Path(peer_dir) if peer_dir is not None else self.log_dir / ".peers"
        self._topology = ClusterTopology(
            self.log_manager,
            process_index=process_index,
            process_count=self.process_count,
            peer_dir=self.peer_dir,
        )
        self._acls: SharedAclStore | None = None
        # One store, so that its follower reloads under the lock its changes take.
        self._quota_store = QuotaStore(self.log_dir)
        self.group_journal_dir = shard_dir(self.log_dir, process_index)
        self.group_journal_dir.mkdir(parents=True, exist_ok=True)
        self.group_metadata_partition = None
        self.transaction_state_partition = None
        self.transaction_journal_dir = transaction_shard_dir(self.log_dir, process_index)
        # Other processes may be starting too: their markers must not hold up ours.
        self.complete_transactions_before_serving = False

    def topology(self, advertised: Callable[[str], tuple[str, int]]) -> Topology:
        """The store's view of the cluster (this process's endpoints are registered
        there by `announce`, so `advertised` is not needed)."""
        return self._topology

    def scram_credentials(self) -> ScramCredentialStore:
        """One `scram-credentials.json` for every process, followed by `services()`."""
        return ScramCredentialStore(self.log_dir / CREDENTIALS_FILE)

    def quota_store(self) -> QuotaStore:
        """One `__client_quotas.json` for every process, followed by `services()`."""
        return self._quota_store

    def broker_config_store(self) -> DynamicBrokerConfigStore:
        """One `__broker_configs.json` for every process, followed by `services()`."""
        return DynamicBrokerConfigStore(self.log_dir)

    def acl_store(self, authorizer: Authorizer) -> AclStore:
        """One `__acls.json` for every process, followed by a service of `services()`."""
        if self._acls is None:
            self._acls = SharedAclStore(self.log_dir, self.poll_interval_s, authorizer)
        return self._acls

    def metrics_port(
        self, metrics: LocalMetrics, bootstrap: Callable[[str], str | None]
    ) -> Service | None:
        """The supervisor serves the cluster's /metrics and console; it reads ours on a
        Unix socket in the private directory."""
        return private_metrics_port(metrics, metrics_socket(self.peer_dir, self.node_id))

    def membership(
        self, context: BrokerContext, listening: Callable[[], Awaitable[object]]
    ) -> ClusterMembership | None:
        return add_cluster_membership(context, listening)

    def internal_listeners(self) -> tuple[InternalListener, ...]:
        """The private channel of the other processes (WriteTxnMarkers, verify-only
        AddPartitionsToTxn): a listener of this process's SocketServer on a Unix socket
        in the private directory, its connections carrying the cluster principal."""
        return (peer_listener(self.peer_dir, self.node_id),)

    def services(
        self,
        context: BrokerContext,
        *,
        credentials: ScramCredentialStore,
        quotas: QuotaManagers,
        broker_configs: BrokerConfigs,
    ) -> list[Service]:
        """The shared ACLs' follower, Produce's verification against the other processes,
        the followers of the other shared files and the load reports that place leaders."""
        acls: list[Service] = [] if self._acls is None else [self._acls]
        bytes_in = context.metrics.meter(TOPIC_METRICS_GROUP, TOPIC_METRICS_TYPE, "BytesInPerSec")
        return [
            *acls,
            LoadReporter(
                self.store,
                self.node_id,
                bytes_in,
                interval_s=self.config.cluster.load_report_interval_ms / 1000,
                window_s=self.config.cluster.load_window_ms / 1000,
            ),
            *self._topology.services(),
            *shared_file_followers(
                self.poll_interval_s, credentials, self._quota_store, quotas, broker_configs
            ),
        ]

    async def announce(self, endpoints: dict[str, tuple[str, int]]) -> None:
        """Register this process's endpoints: it now serves, clients may come."""
        await trio.to_thread.run_sync(self.store.register_broker, self.node_id, endpoints)
        await self.log_manager.refresh()
        log.info("node %d registered in the cluster at %s", self.node_id, endpoints)


def shared_file_followers(
    interval_s: float,
    credentials: ScramCredentialStore,
    quota_store: QuotaStore,
    quotas: QuotaManagers,
    broker_configs: BrokerConfigs,
) -> list[SharedFileFollower]:
    """SCRAM credentials, client quotas and dynamic broker configs changed through
    another process reach this one within the poll interval (see
    broker/cluster/shared_file.py).

    Each reload reads and applies under the lock this process's own changes take: a file
    read before one of our changes and applied after it would undo that change here
    until the next reload."""

    async def reload_credentials() -> None:
        await trio.to_thread.run_sync(credentials.reload)

    async def reload_quotas() -> None:
        async with quota_store.lock:
            quotas.set_all_quotas(await trio.to_thread.run_sync(quota_store.load))

    return [
        SharedFileFollower(credentials.path, reload_credentials, interval_s),
        SharedFileFollower(quota_store.path, reload_quotas, interval_s),
        SharedFileFollower(broker_configs.store_path, broker_configs.reload, interval_s),
    ]
