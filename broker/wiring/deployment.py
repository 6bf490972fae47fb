"""How one broker process is deployed: the part of the assembly that differs between a
broker alone and one process of a cluster.

`KafkaServer` is given a `Deployment` by the composition root (`broker/__main__.py`):
`SingleProcess` (broker/wiring/single_process.py), a cluster's `ClusterMember`
(broker/cluster/member.py), or a host among hosts coordinated through ZooKeeper,
`ZooKeeperDeployment` (broker/hosts/, docs/replication.md). Everything the subsystems ask about where things are
goes through its `Topology` (broker/topology.py); the rest is where this process keeps
its files and what it runs besides the subsystems.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from broker.broker_context import BrokerContext, Service
from broker.coordination.membership import ClusterMembership
from broker.coordinator.group_metadata_partition import GroupMetadataPartition
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.elect_leaders import LeaderElections
from broker.handlers.partition_reassignments import PartitionReassignments
from broker.handlers.replica_tracking import ReplicaTracking
from broker.log.log_manager import LogManager
from broker.metrics_http import LocalMetrics
from broker.net.internal_listener import InternalListener
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer
from broker.security.scram_credentials import ScramCredentialStore
from broker.topology import Topology


class Deployment(Protocol):
    @property
    def log_manager(self) -> LogManager:
        """The log of the partitions this process leads (started as a service)."""
        ...

    @property
    def replication(self) -> ReplicaTracking:
        """What Fetch and Produce tell the leaders of replicated partitions
        (`NO_REPLICATION` where every partition has one replica)."""
        ...

    @property
    def leader_elections(self) -> LeaderElections:
        """ElectLeaders' elections (`NO_ELECTIONS` where every partition has one replica)."""
        ...

    @property
    def partition_reassignments(self) -> PartitionReassignments:
        """Where replicas move (`NO_REASSIGNMENTS` where every partition has one replica)."""
        ...

    @property
    def group_journal_dir(self) -> Path:
        """Where the group coordinator journals the offsets of its groups."""
        ...

    @property
    def group_metadata_partition(self) -> GroupMetadataPartition | None:
        """The replicated `__consumer_offsets` partition the group coordinator keeps its
        state in instead of `group_journal_dir` (hosts coordinated through ZooKeeper),
        or None."""
        ...

    @property
    def transaction_journal_dir(self) -> Path: ...

    @property
    def transaction_state_partition(self) -> GroupMetadataPartition | None:
        """The replicated `__transaction_state` partition the transaction coordinator
        keeps its state in instead of `transaction_journal_dir` (hosts coordinated
        through ZooKeeper), or None."""
        ...

    @property
    def complete_transactions_before_serving(self) -> bool:
        """Whether prepared transactions are finished before the network starts (not
        where other processes, starting too, would have to take their markers)."""
        ...

    def topology(self, advertised: Callable[[str], tuple[str, int]]) -> Topology:
        """Built before any subsystem; `advertised` gives this broker's host and port."""
        ...

    def scram_credentials(self) -> ScramCredentialStore:
        """Where SCRAM credentials are kept (read by every authentication)."""
        ...

    def quota_store(self) -> QuotaStore:
        """Where client quotas are kept (AlterClientQuotas writes there)."""
        ...

    def acl_store(self, authorizer: Authorizer) -> AclStore:
        """Where ACL changes are written; `authorizer` is the one enforcing them."""
        ...

    def broker_config_store(self) -> DynamicBrokerConfigStore:
        """Where dynamic broker configs are kept (IncrementalAlterConfigs writes there)."""
        ...

    def metrics_port(
        self, metrics: LocalMetrics, bootstrap: Callable[[str], str | None]
    ) -> Service | None:
        """The HTTP port of /metrics (and the console), or None."""
        ...

    def membership(
        self, context: BrokerContext, listening: Callable[[], Awaitable[object]]
    ) -> ClusterMembership | None:
        """The ZooKeeper membership (the first service), or None without
        `zookeeper.connect`; it registers once `listening` returns."""
        ...

    def internal_listeners(self) -> tuple[InternalListener, ...]:
        """Listeners only other brokers reach (served by the same SocketServer and
        KafkaApis as the client listeners, with a fixed principal and a few APIs)."""
        ...

    def services(
        self,
        context: BrokerContext,
        *,
        credentials: ScramCredentialStore,
        quotas: QuotaManagers,
        broker_configs: BrokerConfigs,
    ) -> list[Service]:
        """What runs besides the subsystems, started after them."""
        ...
