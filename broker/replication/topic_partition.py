"""The key of every replication decision, as Kafka's TopicPartition."""

from __future__ import annotations

import attrs


@attrs.frozen(order=True)
class TopicPartition:
    """Ordered so that decisions over many partitions come out in a stable order."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
