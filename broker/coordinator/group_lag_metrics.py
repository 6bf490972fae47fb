"""Consumer-group lag per partition, as a dashboard reads it next to the log gauges.

Kafka's broker exports no lag (operators run an exporter that asks for committed
offsets and log end offsets); here the broker holds both, so the gauges are computed
when the metrics are scraped: nothing to register or remove as groups, offsets and
topics come and go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from broker.coordinator.offset_store import OffsetStore
from broker.metrics import MetricSample

GROUP = "kafka.server"
TYPE = "ConsumerGroupLag"


class _PartitionEnd(Protocol):
    @property
    def log_end_offset(self) -> int: ...


class PartitionEnds(Protocol):
    """The one question asked of the log (the coordinator sits below the API layer and
    its log views)."""

    def partition(self, topic: str, partition: int) -> _PartitionEnd | None: ...


def group_lag_samples(
    store: OffsetStore, logs: PartitionEnds, is_local_leader: Callable[[str, int], bool]
) -> Iterator[MetricSample]:
    """`CommittedOffset` for each committed offset of each group whose partition still
    exists, and `Lag` (log end offset minus committed offset, never below 0) where this
    broker leads the partition (the topology says which). Of a partition another process
    leads, the end is there: the supervisor's /metrics joins the two
    (broker/cluster/cluster_metrics.py).
    """
    for group in sorted(store.groups()):
        for (topic, partition), committed in sorted(store.group_offsets(group).items()):
            log = logs.partition(topic, partition)
            if log is None:
                continue
            tags = (("group", group), ("partition", str(partition)), ("topic", topic))
            values = [("CommittedOffset", committed.offset)]
            if is_local_leader(topic, partition):
                values.append(("Lag", max(log.log_end_offset - committed.offset, 0)))
            for name, value in values:
                yield MetricSample(GROUP, TYPE, name, tags, "gauge", {"value": float(value)})
