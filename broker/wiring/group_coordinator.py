"""Wiring of the group coordinator into the broker (one call from KafkaServer)."""

from __future__ import annotations

import functools

from broker.broker_context import BrokerContext
from broker.config import BrokerConfig
from broker.coordinator.consumer_group import ConsumerGroupConfig
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import CoordinatorConfig
from broker.coordinator.group_lag_metrics import group_lag_samples
from broker.handlers.consumer_group_handlers import (
    ConsumerGroupDescribeHandler,
    ConsumerGroupHeartbeatHandler,
)
from broker.handlers.group_admin_handlers import (
    DeleteGroupsHandler,
    DescribeGroupsHandler,
    ListGroupsHandler,
)
from broker.handlers.group_handlers import (
    FindCoordinatorHandler,
    HeartbeatHandler,
    JoinGroupHandler,
    LeaveGroupHandler,
    SyncGroupHandler,
)
from broker.handlers.log_view import LogManagerView
from broker.handlers.offset_handlers import (
    OffsetCommitHandler,
    OffsetDeleteHandler,
    OffsetFetchHandler,
)
from broker.topology import Topology


def coordinator_config(config: BrokerConfig) -> CoordinatorConfig:
    groups = config.groups
    return CoordinatorConfig(
        initial_rebalance_delay_ms=groups.initial_rebalance_delay_ms,
        min_session_timeout_ms=groups.min_session_timeout_ms,
        max_session_timeout_ms=groups.max_session_timeout_ms,
        offsets_retention_ms=groups.offsets_retention_minutes * 60 * 1000,
        offset_metadata_max_bytes=groups.offset_metadata_max_bytes,
        retention_check_interval_ms=groups.offsets_retention_check_interval_ms,
        consumer=ConsumerGroupConfig(
            session_timeout_ms=groups.consumer_session_timeout_ms,
            heartbeat_interval_ms=groups.consumer_heartbeat_interval_ms,
            assignors=groups.consumer_assignors or ("uniform", "range"),
        ),
    )


def add_group_coordinator(
    context: BrokerContext,
    topology: Topology,
    service: GroupCoordinatorService,
    logs: LogManagerView,
) -> None:
    """Register the group APIs over `service` and its lag gauges over `logs`; the
    topology locates each group's coordinator (FindCoordinator)."""
    context.metrics.add_collector(
        functools.partial(group_lag_samples, service.store, logs, topology.is_local_leader)
    )
    auth = context.authorizer
    for handler in (
        FindCoordinatorHandler(
            context.node_id, context.advertised_endpoint, authorizer=auth, topology=topology
        ),
        JoinGroupHandler(service, authorizer=auth),
        SyncGroupHandler(service, authorizer=auth),
        HeartbeatHandler(service, authorizer=auth),
        LeaveGroupHandler(service, authorizer=auth),
        OffsetCommitHandler(service, authorizer=auth),
        OffsetFetchHandler(service, authorizer=auth),
        OffsetDeleteHandler(service, authorizer=auth),
        DescribeGroupsHandler(service, authorizer=auth),
        ListGroupsHandler(service, authorizer=auth),
        DeleteGroupsHandler(service, authorizer=auth),
        ConsumerGroupHeartbeatHandler(service, logs, authorizer=auth),
        ConsumerGroupDescribeHandler(service, logs, authorizer=auth),
    ):
        context.apis.add_handler(handler)
