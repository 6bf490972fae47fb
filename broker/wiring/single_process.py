"""The deployment of a broker alone (`process.count=1`): everything in its log dir."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from broker.broker_context import BrokerContext, Service
from broker.config import BrokerConfig
from broker.coordination.membership import ClusterMembership
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.elect_leaders import NO_ELECTIONS
from broker.handlers.partition_reassignments import NO_REASSIGNMENTS
from broker.handlers.replica_tracking import NO_REPLICATION
from broker.log.log_manager import LogManager
from broker.metrics_http import LocalMetrics
from broker.net.internal_listener import InternalListener
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer
from broker.security.scram_credentials import CREDENTIALS_FILE, ScramCredentialStore
from broker.topology import SingleProcessTopology, Topology
from broker.wiring.cluster_membership import add_cluster_membership


class SingleProcess:
    def __init__(self, config: BrokerConfig) -> None:
        self._config = config
        self._log_dir = Path(config.log_dirs[0])
        self.log_manager = LogManager(config)
        self.replication = NO_REPLICATION
        self.leader_elections = NO_ELECTIONS
        self.partition_reassignments = NO_REASSIGNMENTS
        self.group_journal_dir = self._log_dir
        self.group_metadata_partition = None
        self.transaction_state_partition = None
        self.transaction_journal_dir = self._log_dir
        self.complete_transactions_before_serving = True

    def topology(self, advertised: Callable[[str], tuple[str, int]]) -> Topology:
        return SingleProcessTopology(self._config.node_id, advertised)

    def scram_credentials(self) -> ScramCredentialStore:
        return ScramCredentialStore(self._log_dir / CREDENTIALS_FILE)

    def quota_store(self) -> QuotaStore:
        return QuotaStore(self._log_dir)

    def acl_store(self, authorizer: Authorizer) -> AclStore:
        return AclStore(self._log_dir)

    def broker_config_store(self) -> DynamicBrokerConfigStore:
        return DynamicBrokerConfigStore(self._log_dir)

    def metrics_port(
        self, metrics: LocalMetrics, bootstrap: Callable[[str], str | None]
    ) -> Service | None:
        # Imported here: a cluster process, started often, serves no console.
        from broker.console.console_service import http_port_for

        return http_port_for(self._config, metrics, bootstrap)

    def membership(
        self, context: BrokerContext, listening: Callable[[], Awaitable[object]]
    ) -> ClusterMembership | None:
        return add_cluster_membership(context, listening)

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
        return []
