"""This broker's reassignment throttles (Kafka's ReplicationQuotaManager for LEADER and
FOLLOWER; the quota logic is sans-IO in broker/replication/replication_quota.py).

The rates are the dynamic broker configs `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` (IncrementalAlterConfigs on the broker resource,
as kafka-reassign-partitions sets them on each broker), followed as they change; which
replicas are throttled is read from each topic's `leader.replication.throttled.replicas`
/ `follower.replication.throttled.replicas`, which every broker applies from
`/config/topics/<t>`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.config import BrokerConfig
from broker.config.table import (
    FOLLOWER_REPLICATION_THROTTLED_RATE as FOLLOWER_RATE,
)
from broker.config.table import (
    LEADER_REPLICATION_THROTTLED_RATE as LEADER_RATE,
)
from broker.handlers.broker_configs import BrokerConfigs
from broker.replication.replication_quota import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    UNBOUNDED,
    ReplicationQuotaManager,
    parse_throttled_replicas,
)
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

TopicConfig = Callable[[str, str], str | None]
"""A topic's effective config value (None when the topic is not known here)."""


class ReplicationThrottles:
    def __init__(self, config: BrokerConfig, node_id: int, topic_config: TopicConfig) -> None:
        settings = config.replication
        window_s = float(settings.replication_quota_window_size_seconds)
        samples = settings.replication_quota_window_num
        self._node_id = node_id
        self._topic_config = topic_config
        self.leader = ReplicationQuotaManager(
            settings.leader_replication_throttled_rate,
            window_s,
            samples,
            lambda tp: self._throttled(tp, LEADER_THROTTLED_REPLICAS),
        )
        self.follower = ReplicationQuotaManager(
            settings.follower_replication_throttled_rate,
            window_s,
            samples,
            lambda tp: self._throttled(tp, FOLLOWER_THROTTLED_REPLICAS),
        )

    def _throttled(self, tp: TopicPartition, key: str) -> bool:
        listed = self._topic_config(tp.topic, key)
        if not listed:
            return False
        try:
            return parse_throttled_replicas(listed).throttles(tp.partition, self._node_id)
        except ValueError:  # written by another tool: not ours to throttle by
            return False

    def following(
        self, broker_configs: BrokerConfigs, on_change: Callable[[], None]
    ) -> ThrottleRates:
        """The service that keeps the bounds equal to the dynamic broker configs, calling
        `on_change` after a change (the fetchers asleep over their throttle ask again)."""
        return ThrottleRates(self, broker_configs, on_change)

    def apply(self, leader_rate: str | None, follower_rate: str | None) -> bool:
        """Whether a bound changed."""
        changed = False
        for quota, rate, name in (
            (self.leader, leader_rate, LEADER_RATE),
            (self.follower, follower_rate, FOLLOWER_RATE),
        ):
            bound = float(rate) if rate is not None else float(UNBOUNDED)
            if bound != quota.bound:
                log.info("%s is now %s", name, "unbounded" if bound >= UNBOUNDED else rate)
                quota.update_quota(bound)
                changed = True
        return changed


class ThrottleRates:
    def __init__(
        self,
        throttles: ReplicationThrottles,
        broker_configs: BrokerConfigs,
        on_change: Callable[[], None],
    ) -> None:
        self._throttles = throttles
        self._configs = broker_configs
        self._on_change = on_change

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._apply()
        task_status.started()
        while True:
            await self._configs.applied.wait_transition()
            self._apply()

    def _apply(self) -> None:
        leader, follower = self._configs.value(LEADER_RATE), self._configs.value(FOLLOWER_RATE)
        if self._throttles.apply(leader, follower):
            self._on_change()
