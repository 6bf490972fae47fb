"""What every process knows of the cluster: one immutable snapshot of the store.

A process replaces its image whenever the store's version moves; handlers read
the current image without awaiting anything, so a request sees one consistent
view of brokers and leaders.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import attrs


@attrs.frozen(slots=True)
class BrokerImage:
    """A registered process. `alive` is cleared by the supervisor when the process
    dies and set by the process once it serves; its partitions are offline in between."""

    node_id: int
    endpoints: Mapping[str, tuple[str, int]]
    alive: bool
    applied_version: int


@attrs.frozen(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    configs: Mapping[str, str]
    leaders: tuple[int, ...]
    """The leader node of each partition (index = partition number)."""


@attrs.frozen(slots=True)
class ClusterImage:
    version: int
    brokers: Mapping[int, BrokerImage]
    topics: Mapping[str, TopicImage]

    @classmethod
    def empty(cls) -> ClusterImage:
        return cls(0, {}, {})

    def alive_brokers(self) -> list[BrokerImage]:
        return [b for _, b in sorted(self.brokers.items()) if b.alive]

    def is_alive(self, node_id: int) -> bool:
        broker = self.brokers.get(node_id)
        return broker is not None and broker.alive

    def endpoint(self, node_id: int, listener_name: str) -> tuple[str, int] | None:
        broker = self.brokers.get(node_id)
        if broker is None:
            return None
        return broker.endpoints.get(listener_name)
