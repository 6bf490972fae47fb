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
from collections.abc import Callable
from pathlib import Path

import trio

from broker.config import BrokerConfig, ConfigError
from broker.metrics import MetricsRegistry
from broker.net.acceptor import Acceptor, bind_listener
from broker.net.channel_security import ListenerSecurity, tls_connection_samples
from broker.net.connection_quotas import ConnectionQuotas
from broker.net.endpoint import Endpoint
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
    ) -> None:
        self.config = config
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
        max_request = config.get_int("socket.request.max.bytes")
        self.memory_pool = MemoryPool(
            pool_size(config.get_int("queued.max.request.bytes"), max_request), max_request
        )
        self.request_metrics = RequestMetrics(metrics)
        self.data_channel = RequestChannel(config.get_int("queued.max.requests"), "data-plane")
        self.control_listener = config.get_optional_str("control.plane.listener.name")
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
                    self.config.get_int("socket.listen.backlog.size"),
                    self.config.get_int("socket.receive.buffer.bytes"),
                )
                sockets[endpoint.listener_name] = sock
                self.bound_ports[endpoint.listener_name] = int(sock.getsockname()[1])
        except BaseException:
            for sock in sockets.values():
                sock.close()
            raise
        return sockets

    def _processor_count(self, endpoint: Endpoint) -> int:
        if endpoint.listener_name == self.control_listener:
            return 1
        return self.config.listener_int(endpoint.listener_name, "num.network.threads")

    def _channel_for(self, listener_name: str) -> RequestChannel:
        if listener_name == self.control_listener and self.control_channel is not None:
            return self.control_channel
        return self.data_channel

    async def _add_processors(self, endpoint: Endpoint, count: int) -> None:
        assert self._nursery is not None
        name = endpoint.listener_name
        settings = ProcessorSettings(
            max_request_size=self.config.get_int("socket.request.max.bytes"),
            idle_timeout_ms=self.config.get_int("connections.max.idle.ms"),
            security=self.security.get(name),
            read_timeout_ms=self.config.get_int("socket.request.read.timeout.ms"),
            send_buffer_bytes=self.config.get_int("socket.send.buffer.bytes"),
        )
        for _ in range(count):
            processor_id = self._next_processor_id
            processor = Processor(
                processor_id,
                settings,
                self._channel_for(name),
                self.quotas,
                self.memory_pool,
                self.request_metrics,
                self._is_enabled,
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
            if not self.quotas.is_protected(name)
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
