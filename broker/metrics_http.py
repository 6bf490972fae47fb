"""Prometheus exposition of the broker's metrics registry, served on Trio.

Names follow what operators' dashboards already use for Kafka (the JMX
exporter's Kafka rules), derived mechanically from the registry's
(group, type, name, tags) keys; docs/metrics.md states the rule:

- base name: ``<group>_<type>_<name>``, lower-cased, every character outside
  ``[a-z0-9]`` becoming ``_`` (``kafka.server``/``socket-server-metrics``/
  ``connection-count`` -> ``kafka_server_socket_server_metrics_connection_count``);
- Meter: a counter ``<base>_total`` with a ``PerSec`` suffix of the name
  dropped (``RequestsPerSec`` -> ``kafka_network_requestmetrics_requests_total``),
  and its one-minute rate as the gauge ``<base>_oneminuterate``;
- Histogram: a summary ``<base>`` with quantiles 0.5 and 0.99, ``_count`` and
  ``_sum``, plus the gauges ``<base>_max`` and ``<base>_mean``;
- Gauge: a gauge ``<base>``; tags become labels unchanged.

The HTTP side is a minimal HTTP/1.1 responder on `trio.serve_tcp` (one
request per connection, `Connection: close`), not a thread: `GET /metrics`
answers the exposition, `GET /` a pointer to it, anything else 404.
"""

from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

import trio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CollectorRegistry, Metric

from broker.config import BrokerConfig
from broker.metrics import MetricSample, MetricsRegistry

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^a-z0-9]+")
_LABEL_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_MAX_REQUEST_HEAD = 8192
_REQUEST_TIMEOUT_S = 10.0
_QUANTILES = (("0.5", "p50"), ("0.99", "p99"))


def metric_base_name(group: str, type_: str, name: str) -> str:
    joined = f"{group}_{type_}_{name}".lower()
    return _UNSAFE.sub("_", joined).strip("_")


def _labels(tags: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {_LABEL_UNSAFE.sub("_", k): v for k, v in tags}


class RegistryCollector:
    """A prometheus_client collector translating `MetricsRegistry.snapshot()`."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self._registry = registry

    def describe(self) -> list[Metric]:
        # Metrics come and go with processors and APIs: no fixed description.
        return []

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        helps: dict[str, str] = {}
        by_kind: dict[str, str] = {}
        samples: defaultdict[str, list[tuple[str, dict[str, str], float]]] = defaultdict(list)

        def add(family: str, kind: str, sample: str, labels: dict[str, str], value: float) -> None:
            known = by_kind.setdefault(family, kind)
            if known != kind:
                return  # two kinds under one name: keep the first, never emit invalid text
            samples[family].append((sample, labels, value))

        for metric in self._registry.snapshot():
            self._translate(metric, add, helps)
        for family, entries in samples.items():
            kind = by_kind[family]
            out = Metric(family, helps.get(family, family), kind)
            for sample, labels, value in entries:
                out.add_sample(sample, labels, value)
            families[family] = out
        yield from families.values()

    @staticmethod
    def _translate(metric: MetricSample, add: Any, helps: dict[str, str]) -> None:
        labels = _labels(metric.tags)
        origin = f"{metric.group}:type={metric.type_},name={metric.name}"
        values = metric.values
        if metric.kind == "meter":
            name = metric.name[: -len("PerSec")] if metric.name.endswith("PerSec") else metric.name
            base = metric_base_name(metric.group, metric.type_, name)
            helps[base] = f"Kafka meter {origin} (count)"
            add(base, "counter", base + "_total", labels, values["count"])
            rate = base + "_oneminuterate"
            helps[rate] = f"Kafka meter {origin} (one-minute rate per second)"
            add(rate, "gauge", rate, labels, values["rate"])
        elif metric.kind == "histogram":
            base = metric_base_name(metric.group, metric.type_, metric.name)
            helps[base] = f"Kafka histogram {origin}"
            for quantile, key in _QUANTILES:
                add(base, "summary", base, {**labels, "quantile": quantile}, values[key])
            count = values["count"]
            add(base, "summary", base + "_count", labels, count)
            add(base, "summary", base + "_sum", labels, values["mean"] * count)
            for stat in ("max", "mean"):
                helps[f"{base}_{stat}"] = f"Kafka histogram {origin} ({stat})"
                add(f"{base}_{stat}", "gauge", f"{base}_{stat}", labels, values[stat])
        else:
            base = metric_base_name(metric.group, metric.type_, metric.name)
            helps[base] = f"Kafka gauge {origin}"
            value = values["value"]
            add(base, "gauge", base, labels, value if not math.isinf(value) else math.nan)


def exposition(registry: MetricsRegistry) -> bytes:
    """The text exposition of the registry (what /metrics answers)."""
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(RegistryCollector(registry))
    body: bytes = generate_latest(collectors)
    return body


class MetricsExporter:
    """The `/metrics` endpoint as a broker Service.

    `bound_port` is the port actually served (useful with `metrics.port=0`);
    it is set before the service reports itself started.
    """

    def __init__(self, registry: MetricsRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.bound_port: int | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            listeners = await trio.open_tcp_listeners(self.port, host=self.host or None)
        except OSError as exc:
            # Metrics are an aid, not the service: a busy port must not stop the broker.
            log.error(
                "metrics endpoint disabled: cannot bind %s:%d: %s",
                self.host or "0.0.0.0",
                self.port,
                exc.strerror or exc,
            )
            task_status.started()
            return
        try:
            self.bound_port = listeners[0].socket.getsockname()[1]
            log.info(
                "serving Prometheus metrics on http://%s:%d/metrics",
                self.host or "0.0.0.0",
                self.bound_port,
            )
            async with trio.open_nursery() as nursery:
                task_status.started()
                await nursery.start(trio.serve_listeners, self._serve_one, listeners)
        finally:
            for listener in listeners:
                with trio.CancelScope(shield=True):
                    await listener.aclose()

    async def _serve_one(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(_REQUEST_TIMEOUT_S):
                head = await _read_head(stream)
                if head is None:
                    return
                await stream.send_all(self._respond(head))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    def _respond(self, head: bytes) -> bytes:
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _response(400, "text/plain", b"bad request\n")
        method, target = parts[0], parts[1].split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return _response(405, "text/plain", b"method not allowed\n")
        if target == "/metrics":
            body = exposition(self.registry)
            status, content_type = 200, CONTENT_TYPE_LATEST
        elif target == "/":
            body, status, content_type = b"see /metrics\n", 200, "text/plain"
        else:
            body, status, content_type = b"not found\n", 404, "text/plain"
        return _response(status, content_type, body, include_body=method == "GET")


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer and b"\n\n" not in buffer:
        if len(buffer) > _MAX_REQUEST_HEAD:
            return None
        data = await stream.receive_some(4096)
        if not data:
            return None if not buffer else bytes(buffer)
        buffer += data
    return (
        bytes(buffer).replace(b"\n\n", b"\r\n\r\n", 1) if b"\r\n" not in buffer else bytes(buffer)
    )


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


def _response(status: int, content_type: str, body: bytes, include_body: bool = True) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    return head + body if include_body else head


def find_exporter(services: Iterable[object]) -> MetricsExporter | None:
    """The broker's exporter among its services (None when `metrics.port` is -1)."""
    for service in services:
        if isinstance(service, MetricsExporter):
            return service
    return None


def metrics_exporter(config: BrokerConfig, metrics: MetricsRegistry) -> MetricsExporter | None:
    """Serve `/metrics` on `metrics.port` (-1 disables: None; 0 picks a free port),
    bound to the host of the first listener."""
    port = config.get_int("metrics.port")
    if port < 0:
        return None
    return MetricsExporter(metrics, config.listeners[0].host, port)
