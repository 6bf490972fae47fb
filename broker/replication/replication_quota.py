"""Reassignment throttles: Kafka's ReplicationQuotaManager, sans-IO.

A reassignment copies a whole partition to a new replica, and unthrottled that copy can
take every byte of the network the clients need. Kafka bounds it twice: the leader
counts what it sends to followers of the partitions its topics list in
`leader.replication.throttled.replicas` against `leader.replication.throttled.rate`, and
the follower counts what it fetches of those its topics list in
`follower.replication.throttled.replicas` against `follower.replication.throttled.rate`.
The rate is measured over `replication.quota.window.num` windows of
`replication.quota.window.size.seconds` (Kafka's Rate, `broker.metrics.SampledRate`). While it is over the
bound, a throttled partition is left out: the leader answers it without records, the
follower does not ask for it; nothing is delayed, so the other partitions of the same
request go on. A replica already in sync is never held back (Kafka's
shouldLeaderThrottle / shouldFollowerThrottle), so a throttle on a topic never slows
the ISR down.

The throttled-replica lists are Kafka's: `partition:broker,...` (the broker the entry
applies to: the leader's id in the leader list, the follower's in the follower list)
or `*` for every replica of the topic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import attrs

from broker.config.topic_keys import throttled_replicas
from broker.metrics import SampledRate
from broker.replication.topic_partition import TopicPartition

UNBOUNDED = 2**63 - 1
"""Kafka's default rate (Long.MaxValue): no throttle."""

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"


@attrs.frozen
class ThrottledReplicas:
    """One topic's throttled-replica list: every replica (`*`) or (partition, broker) pairs."""

    every_replica: bool = False
    replicas: frozenset[tuple[int, int]] = frozenset()

    def partitions_of(self, broker_id: int) -> frozenset[int] | None:
        """The partitions throttled on `broker_id`; None for every partition."""
        if self.every_replica:
            return None
        return frozenset(p for p, b in self.replicas if b == broker_id)

    def throttles(self, partition: int, broker_id: int) -> bool:
        return self.every_replica or (partition, broker_id) in self.replicas


NONE_THROTTLED = ThrottledReplicas()


@functools.lru_cache(maxsize=1024)
def parse_throttled_replicas(text: str) -> ThrottledReplicas:
    """Kafka's list, checked as the topic key's parser checks it (ValueError says what is
    wrong); cached, since a leader asks for each throttled partition of each Fetch."""
    stripped = str(throttled_replicas(text))
    if stripped == "*":
        return ThrottledReplicas(every_replica=True)
    pairs = (entry.split(":") for entry in stripped.split(",") if entry.strip())
    return ThrottledReplicas(replicas=frozenset((int(p), int(b)) for p, b in pairs))


class ReplicationQuotaManager:
    """One direction's quota (leader or follower) on one broker: the bound, updated as
    the dynamic broker config changes (`update_quota`), and the measured rate."""

    def __init__(
        self,
        bound: float,
        window_s: float,
        samples: int,
        throttled: Callable[[TopicPartition], bool] = lambda _tp: False,
    ) -> None:
        self._bound = float(bound)
        self._rate = SampledRate(window_s, samples)
        self._throttled = throttled

    def is_throttled(self, tp: TopicPartition) -> bool:
        """Whether the topic's throttled-replica list names this broker's replica of `tp`."""
        return self._throttled(tp)

    @property
    def bound(self) -> float:
        return self._bound

    def update_quota(self, bound: float) -> None:
        self._bound = float(bound)

    @property
    def bounded(self) -> bool:
        return self._bound < UNBOUNDED

    def is_quota_exceeded(self, now: float) -> bool:
        """Whether the bytes recorded put the rate over the bound (never without one)."""
        return self.bounded and self._rate.measure(now) > self._bound

    def record(self, size: int, now: float) -> None:
        """Bytes of throttled partitions sent (leader) or fetched (follower)."""
        if size > 0:
            self._rate.record(size, now)

    def rate(self, now: float) -> float:
        return self._rate.measure(now)

    def throttle_time(self, now: float) -> float:
        """Seconds until the rate is back within the bound if nothing more is recorded
        (0 within it; at most the rate's whole span, when every sample it holds has
        expired): how long a follower with only throttled partitions may sleep."""
        if not self.bounded:
            return 0.0
        # Never past the span the rate remembers (a bound of 0 would say forever).
        span = self._rate.samples * self._rate.window_s
        return min(self._rate.throttle_time(self._bound, now), span)

    def should_throttle(self, tp: TopicPartition, in_sync: bool, now: float) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: a throttled replica that
        is not in sync is left out while the rate is over the bound."""
        return (
            not in_sync and self.bounded and self.is_throttled(tp) and (self.is_quota_exceeded(now))
        )


def unthrottled() -> ReplicationQuotaManager:
    """A quota that never throttles (a broker without replication, the tests' fetchers)."""
    return ReplicationQuotaManager(UNBOUNDED, 1.0, 11)
