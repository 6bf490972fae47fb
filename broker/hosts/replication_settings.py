"""The `replication` settings group (broker/config/settings.py) as the replication
components take it: the controller's, the replica fetchers' and each partition
leader's settings, so every one of them runs on the broker's keys rather than on
its own defaults. Topic keys (`min.insync.replicas`, `unclean.leader.election.enable`)
are read per topic when the decision is made, since a topic's config can differ
from the broker's default."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from broker.config import BrokerConfig
from broker.coordination.kafka_controller import ControllerSettings
from broker.replication.leader_fetch_session import FetchLimits
from broker.replication.partition_leader_state import LeaderSettings
from broker.replication.replica_fetcher import ReplicaFetcherSettings

TopicConfig = Callable[[str, str], str | None]
"""(topic, key) -> the topic's value of the key (its override or the broker's default),
None while the topic is unknown here."""


@attrs.frozen
class ControlledShutdownSettings:
    enable: bool = True
    max_retries: int = 3
    retry_backoff_s: float = 5.0


def controller_settings(config: BrokerConfig, topic_config: TopicConfig) -> ControllerSettings:
    replication = config.replication

    def unclean_leader_election_enable(topic: str) -> bool:
        # A topic not known here yet: never unclean (Kafka's default, and the safe side).
        value = topic_config(topic, "unclean.leader.election.enable")
        return value is not None and value.lower() == "true"

    return ControllerSettings(
        auto_leader_rebalance_enable=replication.auto_leader_rebalance_enable,
        leader_imbalance_per_broker_percentage=replication.leader_imbalance_per_broker_percentage,
        leader_imbalance_check_interval_s=float(
            replication.leader_imbalance_check_interval_seconds
        ),
        unclean_leader_election_enable=unclean_leader_election_enable,
    )


def replica_fetcher_settings(config: BrokerConfig) -> ReplicaFetcherSettings:
    replication = config.replication
    return ReplicaFetcherSettings(
        replica_fetch_backoff_ms=replication.replica_fetch_backoff_ms,
        limits=FetchLimits(
            max_wait_ms=replication.replica_fetch_wait_max_ms,
            partition_max_bytes=replication.replica_fetch_max_bytes,
        ),
    )


def leader_settings(config: BrokerConfig, min_insync_replicas: int) -> LeaderSettings:
    """`min_insync_replicas` is the topic's (its override, else the broker's default)."""
    return LeaderSettings(
        replica_lag_time_max_ms=config.replication.replica_lag_time_max_ms,
        min_insync_replicas=min_insync_replicas,
    )


def controlled_shutdown_settings(config: BrokerConfig) -> ControlledShutdownSettings:
    replication = config.replication
    return ControlledShutdownSettings(
        enable=replication.controlled_shutdown_enable,
        max_retries=replication.controlled_shutdown_max_retries,
        retry_backoff_s=replication.controlled_shutdown_retry_backoff_ms / 1000,
    )
