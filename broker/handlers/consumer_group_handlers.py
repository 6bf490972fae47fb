"""API handlers of the KIP-848 consumer group protocol: ConsumerGroupHeartbeat and
ConsumerGroupDescribe.

The wire names topics by id; the group works on names (what the assignors and
subscriptions use), so the handlers translate with the log's topics, which are
also the partition counts the assignors see.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from broker.coordinator.consumer_group import HeartbeatParams
from broker.coordinator.consumer_group_member import TopicPartitionSet
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.errors import KafkaError
from broker.handlers.auth_helper import (
    GROUP,
    TOPIC,
    authorize,
    authorized_names,
    authorized_operations,
    check_group,
)
from broker.handlers.group_handlers import client_host
from broker.handlers.log_view import LogManagerView
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from broker.protocol.messages import consumer_group_describe_response as describe_wire
from broker.protocol.messages import consumer_group_heartbeat_response as heartbeat_wire
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        topics.setdefault(topic, []).append(partition)
    return topics


class ConsumerGroupHeartbeatHandler:
    api_key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    waits_on_replication = True  # answered once the ISR has its records
    min_version = 0
    max_version = 1

    def __init__(
        self,
        service: GroupCoordinatorService,
        logs: LogManagerView,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._service = service
        self._logs = logs
        self._authorizer = authorizer

    def _owned(self, body: ConsumerGroupHeartbeatRequest) -> TopicPartitionSet | None:
        if body.topic_partitions is None:
            return None
        owned: set[tuple[str, int]] = set()
        for entry in body.topic_partitions:
            topic = self._logs.topic_by_id(entry.topic_id)
            if topic is not None:  # a deleted topic is owned by nobody
                owned.update((topic.name, p) for p in entry.partitions)
        return frozenset(owned)

    async def handle(
        self, request: Request[ConsumerGroupHeartbeatRequest]
    ) -> ConsumerGroupHeartbeatResponse:
        body = request.body
        check_group(self._authorizer, request, AclOperation.READ, body.group_id)
        names = body.subscribed_topic_names or ()
        allowed = authorized_names(self._authorizer, request, AclOperation.DESCRIBE, TOPIC, names)
        denied = sorted(set(names) - allowed)
        if denied:
            # KafkaApis: DESCRIBE on every topic subscribed by name.
            return ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=f"The following topics are unauthorized: {', '.join(denied)}",
            )
        params = HeartbeatParams(
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=body.rebalance_timeout_ms,
            subscribed_topic_names=body.subscribed_topic_names,
            subscribed_topic_regex=body.subscribed_topic_regex,
            server_assignor=body.server_assignor,
            owned=self._owned(body),
            client_id=request.header.client_id or "",
            client_host=client_host(request),
        )
        topics = self._logs.topics()
        result = self._service.consumer_group_heartbeat(
            body.group_id,
            params,
            request.api_version,
            {name: len(t.partitions) for name, t in topics.items()},
        )
        stored = await self._service.stored()
        if stored is not ErrorCode.NONE:
            # Kafka answers once the group's records are committed: a member told an
            # epoch the next coordinator would not know would be fenced there.
            return ConsumerGroupHeartbeatResponse(
                error_code=stored, error_message="the group's records were not replicated"
            )
        if result.error is not ErrorCode.NONE:
            return ConsumerGroupHeartbeatResponse(
                error_code=result.error,
                error_message=result.message,
                member_id=result.member_id or None,
                member_epoch=result.member_epoch,
            )
        assignment = None
        if result.assignment is not None:
            assignment = heartbeat_wire.Assignment(
                topic_partitions=tuple(
                    heartbeat_wire.TopicPartitions(
                        topic_id=topics[name].topic_id, partitions=tuple(parts)
                    )
                    for name, parts in _by_topic(result.assignment).items()
                    if name in topics
                )
            )
        return ConsumerGroupHeartbeatResponse(
            member_id=result.member_id,
            member_epoch=result.member_epoch,
            heartbeat_interval_ms=result.heartbeat_interval_ms,
            assignment=assignment,
        )

    def error_response(self, request: Request, error_code: int) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(error_code=error_code)


class ConsumerGroupDescribeHandler:
    api_key = ApiKey.CONSUMER_GROUP_DESCRIBE
    min_version = 0
    max_version = 0

    def __init__(
        self,
        service: GroupCoordinatorService,
        logs: LogManagerView,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._service = service
        self._logs = logs
        self._authorizer = authorizer

    def _assignment(self, partitions: Iterable[tuple[str, int]]) -> describe_wire.Assignment:
        entries = []
        for name, parts in _by_topic(partitions).items():
            topic = self._logs.topic(name)
            topic_id = topic.topic_id if topic is not None else uuid.UUID(int=0)
            entries.append(
                describe_wire.TopicPartitions(
                    topic_id=topic_id, topic_name=name, partitions=tuple(parts)
                )
            )
        return describe_wire.Assignment(topic_partitions=tuple(entries))

    def _describe(
        self, request: Request, group_id: str, include_operations: bool
    ) -> describe_wire.DescribedGroup:
        if not authorize(self._authorizer, request, AclOperation.DESCRIBE, GROUP, group_id):
            return describe_wire.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id
            )
        try:
            group = self._service.consumer_group(group_id)
        except KafkaError as exc:
            return describe_wire.DescribedGroup(
                error_code=exc.error_code, error_message=exc.message, group_id=group_id
            )
        if group is None:
            known = group_id in self._service.coordinator.groups
            why = "is not a consumer group" if known else "not found"
            return describe_wire.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} {why}.",
                group_id=group_id,
            )
        return describe_wire.DescribedGroup(
            group_id=group_id,
            group_state=group.state,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name,
            members=tuple(
                describe_wire.Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=self._assignment(m.assigned),
                    target_assignment=self._assignment(group.target.get(m.member_id, ())),
                )
                for m in group.members.values()
            ),
            authorized_operations=authorized_operations(
                self._authorizer, request, GROUP, group_id, requested=include_operations
            ),
        )

    async def handle(
        self, request: Request[ConsumerGroupDescribeRequest]
    ) -> ConsumerGroupDescribeResponse:
        body = request.body
        return ConsumerGroupDescribeResponse(
            groups=tuple(
                self._describe(request, g, body.include_authorized_operations)
                for g in body.group_ids
            )
        )

    def error_response(self, request: Request, error_code: int) -> ConsumerGroupDescribeResponse:
        body: ConsumerGroupDescribeRequest = request.body
        return ConsumerGroupDescribeResponse(
            groups=tuple(
                describe_wire.DescribedGroup(error_code=error_code, group_id=g)
                for g in body.group_ids
            )
        )
