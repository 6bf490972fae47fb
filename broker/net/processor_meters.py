"""A processor's meters, built by whoever registers them and passed in at construction."""

from __future__ import annotations

import attrs

from broker.metrics import Meter, MetricsRegistry
from broker.net.authenticator import Event
from broker.net.channel_security import AuthMetrics

GROUP, TYPE = "kafka.server", "socket-server-metrics"
READ_TIMEOUT_METRIC = "read-timeout-connections-killed"
"""Connections closed by socket.request.read.timeout.ms (a meter: -rate and -total)."""
INVALID_REQUEST_METRIC = "invalid-request-connections-closed"
"""Connections closed for a frame Kafka closes them for: a bad size, an undecodable
header or body, an unsupported api key or version (a meter: -rate and -total)."""
_METERS = ("connection-creation", "connection-close", READ_TIMEOUT_METRIC, INVALID_REQUEST_METRIC)


@attrs.frozen
class ProcessorMeters:
    """Kafka's socket-server-metrics of one processor (unregistered ones by default)."""

    connections_created: Meter = attrs.field(factory=Meter)
    connections_closed: Meter = attrs.field(factory=Meter)
    auth: AuthMetrics = attrs.field(factory=AuthMetrics)
    read_timeouts: Meter = attrs.field(factory=Meter)
    invalid_request_closes: Meter = attrs.field(factory=Meter)

    @classmethod
    def registered(
        cls, metrics: MetricsRegistry, listener: str, processor_id: int
    ) -> ProcessorMeters:
        """The meters under Kafka's names and tags (exposed as -rate and -total)."""
        tags = {"listener": listener, "networkProcessor": str(processor_id)}
        created, closed, timeouts, invalid = (
            metrics.meter(GROUP, TYPE, name, **tags) for name in _METERS
        )
        auth = AuthMetrics(
            {event: metrics.meter(GROUP, TYPE, event.value, **tags) for event in Event}
        )
        return cls(created, closed, auth, timeouts, invalid)


def remove_processor_metrics(metrics: MetricsRegistry, listener: str, processor_id: int) -> None:
    """Unregister what `registered` (and the connection-count gauge) registered."""
    tags = {"listener": listener, "networkProcessor": str(processor_id)}
    for name in ("connection-count", *_METERS, *(event.value for event in Event)):
        metrics.remove(GROUP, TYPE, name, **tags)


class BusyTime:
    """Nanoseconds a processor spent working (NetworkProcessorAvgIdlePercent), added to
    by its admission and its connection tasks."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = 0
