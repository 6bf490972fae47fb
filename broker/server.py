"""The broker process: subsystems, the API layer, handler pools and the network.

`KafkaServer.run` is started with `nursery.start()` and reports readiness
only once every subsystem is up and every listener is bound and served.
`shutdown()` asks for a graceful stop: acceptors stop, no new request is
read, in-flight requests are answered within `broker.shutdown.timeout.ms`,
the network is cancelled, and only then the subsystems (which leave their
state durable). No task outlives the server's nursery.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from broker.broker_context import BrokerContext, Service
from broker.config import BrokerConfig
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.handlers.api_versions import ApiVersionsHandler
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.kafka_apis import KafkaApis, standard_middleware
from broker.handlers.log_topics import LogTopicSource
from broker.handlers.metadata import MetadataHandler
from broker.handlers.middleware.authorization import ClusterActionAuthorization
from broker.meta_properties import load_or_create_cluster_id
from broker.metrics import MetricsRegistry
from broker.metrics_http import LocalMetrics
from broker.net.request_handler_pool import RequestHandlerPool
from broker.net.socket_server import SocketServer, check_resize
from broker.process_metrics import register_process_metrics
from broker.security.acl_store import AclStore
from broker.transaction.marker_writer import LocalMarkerWriter
from broker.wiring.acl_apis import add_acl_apis, load_authorizer
from broker.wiring.data_apis import add_data_apis
from broker.wiring.deployment import Deployment
from broker.wiring.group_coordinator import add_group_coordinator, coordinator_config
from broker.wiring.log_cleaner import add_log_cleaner_metrics
from broker.wiring.quota_apis import add_quota_apis
from broker.wiring.security_apis import add_security_apis
from broker.wiring.single_process import SingleProcess
from broker.wiring.transaction_coordinator import add_transaction_coordinator

log = logging.getLogger(__name__)


class KafkaServer:
    """One broker: everything it runs lives in the nursery of `run()`.

    `deployment` says how it is deployed (broker/wiring/deployment.py): alone by
    default, or one process of a cluster (the composition root, broker/__main__.py,
    makes that one); its topology is built first and given to every subsystem."""

    def __init__(self, config: BrokerConfig, *, deployment: Deployment | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self.deployment = deployment if deployment is not None else SingleProcess(config)
        self.metrics = MetricsRegistry()
        # A cluster process's internal listener: the other processes' private channel.
        internal = self.deployment.internal_listeners()
        self.apis = KafkaApis([], standard_middleware({i.name: i.principal for i in internal}))
        self.scram_credentials = self.deployment.scram_credentials()
        # The stored dynamic broker configs, over server.properties: the network and the
        # handler pool start with them (Kafka's DynamicBrokerConfig at startup).
        self.broker_configs = BrokerConfigs(self, self.deployment.broker_config_store())
        running = self.broker_configs.startup_config()
        self.socket_server = SocketServer(
            running, self.metrics, self.apis.is_enabled, self.scram_credentials, internal
        )
        self.cluster_id = load_or_create_cluster_id(
            self.log_dirs[0], self.node_id, config.server.cluster_id
        )
        self.apis.add_handler(ApiVersionsHandler(self.apis.supported_versions))
        self.topology = self.deployment.topology(self.socket_server.advertised_endpoint)
        self.authorizer = load_authorizer(config, AclStore(self.log_dirs[0]))
        self.acl_store = self.deployment.acl_store(self.authorizer)
        self.apis.use(ClusterActionAuthorization(self.authorizer, {i.principal for i in internal}))
        self.context = BrokerContext(
            config=config,
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            log_dirs=tuple(self.log_dirs),
            metrics=self.metrics,
            apis=self.apis,
            authorizer=self.authorizer,
            advertised_endpoint=self.socket_server.advertised_endpoint,
        )
        self.services: list[Service] = []
        # Set once every listener is bound: the ports a registration publishes are known.
        self.listening = trio.Event()
        self._add_subsystems()
        self.data_handlers = RequestHandlerPool(
            self.socket_server.data_channel, self.apis, running.network.num_io_threads
        )
        control = self.socket_server.control_channel
        self.control_handlers = RequestHandlerPool(control, self.apis, 1) if control else None
        self.metrics.gauge(
            "kafka.server",
            "KafkaRequestHandlerPool",
            "RequestHandlerAvgIdlePercent",
            self.data_handlers.idle_fraction,
        )
        register_process_metrics(self.metrics)
        self._shutdown_requested = trio.Event()
        self.stopped = trio.Event()

    def _add_subsystems(self) -> None:
        """Create the subsystems from explicit collaborators, in start-up order.

        Each subsystem's wiring function takes the broker's context (broker_context.py)
        and its own collaborators, registers its handlers, and returns what has a
        lifetime; the services are started in the order they are appended here.
        """
        context, config, topology = self.context, self.config, self.topology
        deployment = self.deployment
        metrics_port = deployment.metrics_port(
            LocalMetrics(self.metrics, self.node_id), self._listener_address
        )
        if metrics_port is not None:
            self.services.append(metrics_port)
        # Hosts forming one cluster through ZooKeeper (only with zookeeper.connect).
        self.membership = deployment.membership(context, self.listening.wait)
        if self.membership is not None:
            self.services.append(self.membership)
        self.log_manager = deployment.log_manager
        self.metadata = MetadataHandler(
            self.node_id,
            self.cluster_id,
            self.socket_server.advertised_endpoint,
            LogTopicSource(self.log_manager, topology),
            authorizer=self.authorizer,
            auto_create_topics=config.log.auto_create_topics_enable,
            topology=topology,
        )
        self.apis.add_handler(self.metadata)
        self.services.append(self.log_manager)
        add_log_cleaner_metrics(context, self.log_manager)
        groups = GroupCoordinatorService(
            coordinator_config(config),
            deployment.group_journal_dir,
            topology,
            deployment.group_metadata_partition,
        )
        self.services.append(groups)
        add_group_coordinator(context, topology, groups, self.log_manager)
        local_markers = LocalMarkerWriter(
            self.log_manager,
            groups,
            on_marker=topology.on_marker,
            replication=deployment.replication,
        )
        transactions = add_transaction_coordinator(
            context,
            topology,
            self.log_manager,
            groups,
            local_markers,
            journal_dir=deployment.transaction_journal_dir,
            complete_before_serving=deployment.complete_transactions_before_serving,
            partition=deployment.transaction_state_partition,
        )
        self.services.append(transactions.service)
        add_data_apis(
            context,
            topology,
            self.log_manager,
            self.broker_configs,
            transaction_verifier=transactions.verifier,
            replication=deployment.replication,
            leader_elections=deployment.leader_elections,
            partition_reassignments=deployment.partition_reassignments,
        )
        add_acl_apis(context, self.acl_store)
        add_security_apis(context, self.scram_credentials)
        self.quotas = add_quota_apis(
            context,
            self.socket_server.quotas.update_ip_connection_rate_quota,
            deployment.quota_store(),
        )
        self.services += deployment.services(
            context,
            credentials=self.scram_credentials,
            quotas=self.quotas,
            broker_configs=self.broker_configs,
        )

    async def run(
        self, *, task_status: trio.TaskStatus[KafkaServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start in order, report ready, serve until `shutdown()`, stop in order."""
        try:
            async with trio.open_nursery() as services:
                for service in self.services:
                    await services.start(service.run)
                await self._run_network(task_status)
                services.cancel_scope.cancel()
        finally:
            self.stopped.set()

    async def _run_network(self, task_status: trio.TaskStatus[KafkaServer]) -> None:
        """The API layer, handler pools and socket server; returns after shutdown."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.apis.run)
            await nursery.start(self.data_handlers.run)
            if self.control_handlers is not None:
                await nursery.start(self.control_handlers.run)
            await nursery.start(self.socket_server.run)
            for endpoint in self.config.listeners:
                log.info(
                    "listening on %s://%s:%d (advertised as %s:%d)",
                    endpoint.listener_name,
                    endpoint.host or "*",
                    self.socket_server.bound_ports[endpoint.listener_name],
                    *self.socket_server.advertised_endpoint(endpoint.listener_name),
                )
            self.listening.set()
            log.info("broker %d of cluster %s started", self.node_id, self.cluster_id)
            task_status.started(self)
            await self._shutdown_requested.wait()
            if self.membership is not None:  # Kafka's controlled shutdown comes first
                await self.membership.leave()
            await self._stop_gracefully()
            nursery.cancel_scope.cancel()

    def shutdown(self) -> None:
        """Ask for a graceful shutdown; `run()` returns when it is done."""
        self._shutdown_requested.set()

    async def _stop_gracefully(self) -> None:
        timeout_s = self.config.server.shutdown_timeout_ms / 1000
        log.info("shutting down: no new connections or requests; answering in-flight requests")
        self.apis.hurry_deferred()
        with trio.move_on_after(timeout_s) as scope:
            await self.socket_server.stop_processing_requests()
        if scope.cancelled_caught:
            log.warning(
                "in-flight requests were not all answered within broker.shutdown.timeout.ms=%d",
                int(timeout_s * 1000),
            )
        self.socket_server.shutdown()
        log.info("broker %d shut down", self.node_id)

    # -- dynamic configuration (IncrementalAlterConfigs on the broker resource) --
    async def resize_network_threads(self, new_count: int) -> None:
        await self.socket_server.resize_network_threads(new_count)

    def resize_io_threads(self, new_count: int) -> None:
        check_resize("num.io.threads", self.data_handlers.size, new_count)
        self.data_handlers.resize(new_count)

    def update_connection_quotas(self, config: BrokerConfig) -> None:
        """New connection limits for the acceptors; blocked ones re-check at once."""
        self.socket_server.quotas.update_config(config)

    def advertised_endpoints(self) -> dict[str, tuple[str, int]]:
        """Each listener's host and port as clients are told (once bound)."""
        return {
            e.listener_name: self.socket_server.advertised_endpoint(e.listener_name)
            for e in self.config.listeners
        }

    def _listener_address(self, listener_name: str) -> str | None:
        """HOST:PORT to reach a listener of this broker (None before it is bound)."""
        port = self.socket_server.bound_ports.get(listener_name)
        if port is None:
            return None
        endpoint = next(e for e in self.config.listeners if e.listener_name == listener_name)
        host = endpoint.host if endpoint.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"{host}:{port}"

    def bound_port(self, listener_name: str | None = None) -> int:
        """The port a listener is bound to (the first listener by default)."""
        name = listener_name or self.config.listeners[0].listener_name
        return self.socket_server.bound_ports[name]
