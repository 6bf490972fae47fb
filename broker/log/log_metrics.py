"""Kafka's per-partition log gauges (kafka.log:type=Log,name=Size|LogEndOffset|...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from broker.log.log_manager import LogManager
from broker.metrics import MetricSample


def log_samples(
    log_manager: LogManager, is_local_leader: Callable[[str, int], bool]
) -> Iterator[MetricSample]:
    """One gauge of each kind per partition this broker leads (the topology says
    which), read when the metrics are scraped."""
    for topic in list(log_manager.topics().values()):
        for partition in list(topic.partitions):
            if not is_local_leader(topic.name, partition.partition):
                continue  # another broker leads it and reports it
            tags = (("partition", str(partition.partition)), ("topic", topic.name))
            for name, value in (
                ("Size", partition.size_bytes),
                ("LogEndOffset", partition.log_end_offset),
                ("LogStartOffset", partition.log_start_offset),
                ("NumLogSegments", len(partition.segments)),
            ):
                yield MetricSample("kafka.log", "Log", name, tags, "gauge", {"value": float(value)})
