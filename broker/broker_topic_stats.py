"""Kafka's BrokerTopicMetrics: bytes and messages in and out, per topic and in total."""

from __future__ import annotations

from broker.metrics import Meter, MetricsRegistry

GROUP = "kafka.server"
TYPE = "BrokerTopicMetrics"


class BrokerTopicStats:
    """Meters under Kafka's names (BytesInPerSec, MessagesInPerSec, BytesOutPerSec).

    Each name exists once with a `topic` tag per topic and once without tags for all
    topics, as in Kafka. Meters are looked up once per (name, topic) and cached, so the
    produce and fetch paths pay a dict lookup and two increments.
    """

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self._registry = registry if registry is not None else MetricsRegistry()
        self._meters: dict[tuple[str, str], tuple[Meter, Meter]] = {}

    def _pair(self, name: str, topic: str) -> tuple[Meter, Meter]:
        pair = self._meters.get((name, topic))
        if pair is None:
            pair = (
                self._registry.meter(GROUP, TYPE, name, topic=topic),
                self._registry.meter(GROUP, TYPE, name),
            )
            self._meters[(name, topic)] = pair
        return pair

    def record_produced(self, topic: str, size: int, messages: int) -> None:
        """A batch of `size` bytes holding `messages` records was appended to `topic`."""
        for meter in self._pair("BytesInPerSec", topic):
            meter.mark(size)
        for meter in self._pair("MessagesInPerSec", topic):
            meter.mark(messages)

    def record_fetched(self, topic: str, size: int) -> None:
        """`size` bytes of `topic`'s records left in a Fetch response."""
        for meter in self._pair("BytesOutPerSec", topic):
            meter.mark(size)

    def record_corrupt_fetch(self, topic: str) -> None:
        """A Fetch of `topic` met a corrupt batch: answered CORRUPT_MESSAGE, or, while an
        in-sync replica takes over to repair it, NOT_LEADER_OR_FOLLOWER (ours, not
        Kafka's, whose FailedFetchRequestsPerSec counts every fetch error alike)."""
        for meter in self._pair("CorruptBatchFetchesPerSec", topic):
            meter.mark()

    def remove_topic(self, topic: str) -> None:
        """A deleted topic's meters leave the registry; the totals keep their counts."""
        for name, _topic in [key for key in self._meters if key[1] == topic]:
            del self._meters[(name, topic)]
            self._registry.remove(GROUP, TYPE, name, topic=topic)
