"""Consumer-group lag per partition, as a dashboard reads it next to the log gauges.

Kafka's broker exports no lag (operators run an exporter that asks for committed
offsets and log end offsets); here the broker holds both, so the gauges are computed
when the metrics are scraped: nothing to register or remove as groups, offsets and
topics come and go.
"""

from __future__ import annotations

from collections.abc import Iterator

from broker.cluster.remote_partition import RemotePartition
from broker.coordinator.offset_store import OffsetStore
from broker.handlers.log_view import LogManagerView
from broker.metrics import MetricSample

GROUP = "kafka.server"
TYPE = "ConsumerGroupLag"


def group_lag_samples(store: OffsetStore, logs: LogManagerView) -> Iterator[MetricSample]:
    """`CommittedOffset` and `Lag` (log end offset minus committed offset, never below 0)
    for each committed offset of each group whose partition still exists."""
    for group in sorted(store.groups()):
        for (topic, partition), committed in sorted(store.group_offsets(group).items()):
            log = logs.partition(topic, partition)
            if log is None or isinstance(log, RemotePartition):
                continue  # gone, or led by another process of the cluster (its end is there)
            tags = (("group", group), ("partition", str(partition)), ("topic", topic))
            lag = max(log.log_end_offset - committed.offset, 0)
            for name, value in (("CommittedOffset", committed.offset), ("Lag", lag)):
                yield MetricSample(GROUP, TYPE, name, tags, "gauge", {"value": float(value)})
