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

The HTTP side is `broker/http_port.py` (hypercorn on Trio) with the routes of
`broker/console/web_app.py`; a cluster's supervisor serves every process's series
there, each labelled with its `node` (`broker/cluster/cluster_metrics.py`).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry, Metric

from broker.metrics import MetricSample, MetricsRegistry

_UNSAFE = re.compile(r"[^a-z0-9]+")
_LABEL_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_QUANTILES = (("0.5", "p50"), ("0.99", "p99"))


def metric_base_name(group: str, type_: str, name: str) -> str:
    joined = f"{group}_{type_}_{name}".lower()
    return _UNSAFE.sub("_", joined).strip("_")


def _labels(tags: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {_LABEL_UNSAFE.sub("_", k): v for k, v in tags}


class RegistryCollector:
    """A prometheus_client collector translating `MetricsRegistry.snapshot()`."""

    def __init__(self, registry: MetricsRegistry, labels: dict[str, str] | None = None) -> None:
        self._registry = registry
        self._extra = labels or {}

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

        extra = self._extra

        def labelled(family: str, kind: str, sample: str, labels: dict[str, str], v: float) -> None:
            add(family, kind, sample, {**labels, **extra}, v)

        for metric in self._registry.snapshot():
            self._translate(metric, labelled, helps)
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


class MetricsSource(Protocol):
    """What /metrics and the console read: this process's series, or a cluster's."""

    async def families(self) -> list[Metric]: ...


class LocalMetrics:
    """This process's registry as metric families, each series labelled with its node."""

    def __init__(self, registry: MetricsRegistry, node_id: int) -> None:
        self._collector = RegistryCollector(registry, {"node": str(node_id)})

    async def families(self) -> list[Metric]:
        return list(self._collector.collect())


class _Families:
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def exposition_of(families: Iterable[Metric]) -> bytes:
    """The text exposition of metric families (what /metrics answers)."""
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(_Families(families))
    body: bytes = generate_latest(collectors)
    return body
