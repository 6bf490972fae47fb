"""SocketServer: listeners, their acceptors and processors, in one nursery.

Startup order follows Kafka and hypercorn: every listener is bound first (a
bind failure aborts startup before anything is served), then processors
start, then acceptors, and only then is readiness reported, so an open port
means a ready broker. Shutdown reverses it: acceptors stop, processors stop
reading and answer what is in flight, then everything is cancelled.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

from broker.config import BrokerConfig, ConfigError
from broker.metrics import MetricsRegistry
from broker.net.acceptor import Acceptor, bind_listener
from broker.net.channel_security import ListenerSecurity, tls_connection_samples
from broker.net.connection_quotas import ConnectionQuotas
from broker.net.endpoint import Endpoint
from broker.net.internal_listener import InternalListener, accept_internal, bind_internal
from broker.net.memory_pool import MemoryPool, pool_size
from broker.net.processor import Processor, ProcessorSettings, idle_percent_mean
from broker.net.processor_meters import ProcessorMeters, remove_processor_metrics
from broker.net.request_channel import RequestChannel
from broker.net.request_metrics import RequestMetrics
from broker.security.scram_credentials import CREDENTIALS_FILE, ScramCredentialStore

log = logging.getLogger(__name__)

CONTROL_PLANE_QUEUE_SIZE = 20

IsEnabled = Callable[[int, int], bool]


def check_resize(key: str, current: int, new: int) -> None:
    """Kafka's rule for thread-count changes: >= 1, >= half and <= double the current."""
    if new < 1 or new * 2 < current or new > current * 2:
        raise ConfigError(
            f"{key}: new value {new} must be >= 1, >= half and <= double the current value {current}"
        )


class SocketServer:
    """The network front-end of the broker."""

    def __init__(
        self,
        config: BrokerConfig,
        metrics: MetricsRegistry,
        is_enabled: IsEnabled,
        credentials: ScramCredentialStore | None = None,
        internal_listeners: Sequence[InternalListener] = (),
    ) -> None:
        self.config = config
        # The cluster's own listeners (Unix sockets, a fixed principal): internal_listener.py.
        self.internal_listeners = tuple(internal_listeners)
        self._internal_names = frozenset(i.name for i in self.internal_listeners)
        self.credentials = credentials or ScramCredentialStore(
            Path(config.log_dirs[0]) / CREDENTIALS_FILE
        )
        # Built now so that a bad key store or JAAS config stops the broker at start-up.
        self.security = {
            e.listener_name: ListenerSecurity.for_endpoint(config, e, self.credentials)
            for e in config.listeners
        }
        self.metrics = metrics
        self._is_enabled = is_enabled
        self.quotas = ConnectionQuotas(config)
        max_request = config.network.socket_request_max_bytes
        self.memory_pool = MemoryPool(
            pool_size(config.network.queued_max_request_bytes, max_request), max_request
        )
        self.request_metrics = RequestMetrics(metrics)
        self.data_channel = RequestChannel(config.network.queued_max_requests, "data-plane")
        self.control_listener = config.network.control_plane_listener_name
        self.control_channel = (
            RequestChannel(CONTROL_PLANE_QUEUE_SIZE, "control-plane")
            if self.control_listener
            else None
        )
        self.processors: dict[str, list[Processor]] = {}
        self.acceptors: dict[str, Acceptor] = {}
        self.bound_ports: dict[str, int] = {}
        self._next_processor_id = 0
        self._nursery: trio.Nursery | None = None
        self._stopped = trio.Event()
        for endpoint in config.listeners:
            self.quotas.add_listener(endpoint.listener_name)
        # Counted apart, without limits: the cluster's own connections neither count
        # against max.connections nor make a client listener the "protected" one.
        self._internal_quotas = ConnectionQuotas(BrokerConfig({}))
        for internal in self.internal_listeners:
            self._internal_quotas.add_listener(internal.name)
        self._internal_accept = trio.CancelScope()
        self._register_metrics()

    # -- startup --------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind, start processors, start acceptors, report ready; run until stopped."""
        sockets = await self._bind_all()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.data_channel.run_timers)
                if self.control_channel is not None:
                    await nursery.start(self.control_channel.run_timers)
                for endpoint in self.config.listeners:
                    self.processors[endpoint.listener_name] = []
                    await self._add_processors(endpoint, self._processor_count(endpoint))
                for endpoint in self.config.listeners:
                    acceptor = Acceptor(
                        endpoint,
                        sockets.pop(endpoint.listener_name),
                        self.processors[endpoint.listener_name],
                        self.quotas,
                        self.metrics.meter(
                            "kafka.network",
                            "Acceptor",
                            "AcceptorBlockedPercent",
                            listener=endpoint.listener_name,
                        ),
                    )
                    self.acceptors[endpoint.listener_name] = acceptor
                    await nursery.start(acceptor.run)
                await self._serve_internal_listeners(nursery, sockets)
                task_status.started()
                await self._stopped.wait()
                nursery.cancel_scope.cancel()
        finally:
            for sock in sockets.values():
                sock.close()

    async def _bind_all(self) -> dict[str, trio.socket.SocketType]:
        sockets: dict[str, trio.socket.SocketType] = {}
        try:
            for endpoint in self.config.listeners:
                sock = await bind_listener(
                    endpoint,
                    self.config.network.socket_listen_backlog_size,
                    self.config.network.socket_receive_buffer_bytes,
                )
                sockets[endpoint.listener_name] = sock
                self.bound_ports[endpoint.listener_name] = int(sock.getsockname()[1])
            for internal in self.internal_listeners:
                sockets[internal.name] = await bind_internal(
                    internal, self.config.network.socket_listen_backlog_size
                )
        except BaseException:
            for sock in sockets.values():
                sock.close()
            raise
        return sockets

    def _processor_count(self, endpoint: Endpoint) -> int:
        if endpoint.listener_name == self.control_listener:
            return 1
        return self.config.network.listener(endpoint.listener_name).num_network_threads

    def _channel_for(self, listener_name: str) -> RequestChannel:
        if listener_name == self.control_listener and self.control_channel is not None:
            return self.control_channel
        return self.data_channel

    async def _serve_internal_listeners(
        self, nursery: trio.Nursery, sockets: dict[str, trio.socket.SocketType]
    ) -> None:
        """One processor each, restricted to the listener's APIs and never idle-closed."""
        for internal in self.internal_listeners:
            self.processors[internal.name] = []
            settings = attrs.evolve(self._processor_settings(internal.name), idle_timeout_ms=-1)
            keys = internal.api_keys

            def is_enabled(key: int, version: int, keys: frozenset[int] = keys) -> bool:
                return key in keys and self._is_enabled(key, version)

            await self._add_processors_named(
                internal.name, 1, settings, is_enabled, self._internal_quotas
            )
        if self.internal_listeners:
            bound = [(internal, sockets.pop(internal.name)) for internal in self.internal_listeners]
            await nursery.start(self._accept_internal, bound)

    async def _accept_internal(
        self,
        bound: list[tuple[InternalListener, trio.socket.SocketType]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on the internal listeners until stop_processing_requests()."""
        with self._internal_accept:
            async with trio.open_nursery() as nursery:
                for internal, sock in bound:
                    await nursery.start(
                        accept_internal,
                        internal,
                        sock,
                        self.processors[internal.name],
                        self._internal_quotas,
                    )
                task_status.started()

    async def _add_processors(self, endpoint: Endpoint, count: int) -> None:
        name = endpoint.listener_name
        await self._add_processors_named(
            name, count, self._processor_settings(name), self._is_enabled, self.quotas
        )

    def _processor_settings(self, name: str) -> ProcessorSettings:
        return ProcessorSettings(
            max_request_size=self.config.network.socket_request_max_bytes,
            idle_timeout_ms=self.config.network.connections_max_idle_ms,
            security=self.security.get(name),
            read_timeout_ms=self.config.network.socket_request_read_timeout_ms,
            send_buffer_bytes=self.config.network.socket_send_buffer_bytes,
        )

    async def _add_processors_named(
        self,
        name: str,
        count: int,
        settings: ProcessorSettings,
        is_enabled: IsEnabled,
        quotas: ConnectionQuotas,
    ) -> None:
        assert self._nursery is not None
        for _ in range(count):
            processor_id = self._next_processor_id
            processor = Processor(
                processor_id,
                settings,
                self._channel_for(name),
                quotas,
                self.memory_pool,
                self.request_metrics,
                is_enabled,
                self.close_excess_connection,
                ProcessorMeters.registered(self.metrics, name, processor_id),
            )
            self._next_processor_id += 1
            await self._nursery.start(processor.run)
            self.processors[name].append(processor)
            self._register_processor_metrics(name, processor)

    # -- runtime resize --------------------------------------------------------
    async def resize_network_threads(self, new_count: int) -> None:
        """Change `num.network.threads` on every data-plane listener while running."""
        for endpoint in self.config.listeners:
            if endpoint.listener_name == self.control_listener:
                continue
            current = len(self.processors[endpoint.listener_name])
            check_resize("num.network.threads", current, new_count)
        for endpoint in self.config.listeners:
            if endpoint.listener_name == self.control_listener:
                continue
            processors = self.processors[endpoint.listener_name]
            if new_count > len(processors):
                await self._add_processors(endpoint, new_count - len(processors))
            while len(processors) > new_count:
                # Out of the round-robin first, then its connections are closed.
                removed = processors.pop()
                removed.shutdown()
                remove_processor_metrics(self.metrics, endpoint.listener_name, removed.id)
        self.config = self.config.with_updates({"num.network.threads": str(new_count)})

    def close_excess_connection(self) -> None:
        """Close one connection of a non-protected listener (spec §3.5).

        Called when a protected (inter-broker) listener admitted a connection
        past the broker-wide `max.connections`; the victim is a connection
        already closing, else the least recently active one.
        """
        candidates = [
            (candidate, processor)
            for name, processors in self.processors.items()
            if not self.quotas.is_protected(name) and name not in self._internal_names
            for processor in processors
            if (candidate := processor.excess_candidate()) is not None
        ]
        if candidates:
            victim, processor = min(
                candidates, key=lambda pair: (not pair[0].closing, pair[0].last_active)
            )
            processor.close_for_excess(victim)

    # -- shutdown ------------------------------------------------------------------
    async def stop_processing_requests(self) -> None:
        """Stop accepting and reading; returns once in-flight requests are answered."""
        for acceptor in self.acceptors.values():
            acceptor.stop()
        self._internal_accept.cancel()
        async with trio.open_nursery() as nursery:
            for processors in self.processors.values():
                for processor in processors:
                    nursery.start_soon(processor.drain)

    def shutdown(self) -> None:
        """Close everything now (after the graceful part, or its deadline)."""
        self._stopped.set()

    # -- endpoints -------------------------------------------------------------------
    def advertised_endpoint(self, listener_name: str) -> tuple[str, int]:
        """The host and port clients should use for `listener_name`."""
        for endpoint in self.config.advertised_listeners:
            if endpoint.listener_name == listener_name:
                host = endpoint.host or socket.getfqdn()
                port = endpoint.port or self.bound_ports.get(listener_name, 0)
                return host, port
        raise KeyError(listener_name)

    # -- metrics ---------------------------------------------------------------------
    def _all_processors(self) -> list[Processor]:
        return [
            p for name, ps in self.processors.items() if name != self.control_listener for p in ps
        ]

    def _register_metrics(self) -> None:
        m = self.metrics
        m.gauge(
            "kafka.network",
            "SocketServer",
            "NetworkProcessorAvgIdlePercent",
            lambda: idle_percent_mean([p.idle_fraction() for p in self._all_processors()]),
        )
        m.gauge(
            "kafka.network",
            "RequestChannel",
            "RequestQueueSize",
            lambda: float(self.data_channel.request_queue_size()),
        )
        m.gauge(
            "kafka.network",
            "RequestChannel",
            "ResponseQueueSize",
            lambda: float(self.data_channel.response_queue_size()),
        )
        m.gauge(
            "kafka.network",
            "SocketServer",
            "MemoryPoolAvailable",
            lambda: float(self.memory_pool.available),
        )
        m.gauge(
            "kafka.network", "SocketServer", "MemoryPoolUsed", lambda: float(self.memory_pool.used)
        )
        m.gauge(
            "kafka.network",
            "SocketServer",
            "ResponseMemoryUsed",
            lambda: float(self.memory_pool.responses.used),
        )
        m.add_collector(
            lambda: tls_connection_samples(
                (name, p.id, [c.stream for c in p.connections.values()])
                for name, processors in list(self.processors.items())
                for p in processors
            )
        )
        if self.control_channel is not None:
            control = self.control_channel
            m.gauge(
                "kafka.network",
                "RequestChannel",
                "ControlPlaneRequestQueueSize",
                lambda: float(control.request_queue_size()),
            )

    def _register_processor_metrics(self, listener: str, processor: Processor) -> None:
        """Kafka's socket-server-metrics connection-count (its meters are the processor's,
        registered at its construction: ProcessorMeters)."""
        tags = {"listener": listener, "networkProcessor": str(processor.id)}
        self.metrics.gauge(
            "kafka.server",
            "socket-server-metrics",
            "connection-count",
            lambda: float(processor.connection_count()),
            **tags,
        )
