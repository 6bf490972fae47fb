"""CreatePartitions (key 37): grow a topic; assignments must name this broker only."""

from __future__ import annotations

from collections import Counter

from broker.errors import KafkaError
from broker.handlers.auth_helper import TOPIC, authorized_names
from broker.handlers.log_view import LogManagerView
from broker.handlers.topic_resource import find_topic
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from broker.protocol.messages.create_partitions_request import CreatePartitionsTopic
from broker.protocol.messages.create_partitions_response import CreatePartitionsTopicResult
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.CREATE_PARTITIONS


class CreatePartitionsHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 3

    def __init__(
        self, log_manager: LogManagerView, node_id: int, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._logs = log_manager
        self._node_id = node_id
        self._authorizer = authorizer

    async def handle(self, request: Request[CreatePartitionsRequest]) -> CreatePartitionsResponse:
        body = request.body
        counts = Counter(t.name for t in body.topics)
        alterable = authorized_names(self._authorizer, request, AclOperation.ALTER, TOPIC, counts)
        results = []
        for wanted in body.topics:
            try:
                if counts[wanted.name] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                if wanted.name not in alterable:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                await self._grow(wanted, body.validate_only)
                code, message = ErrorCode.NONE, None
            except KafkaError as exc:
                code, message = exc.error_code, exc.message
            results.append(
                CreatePartitionsTopicResult(
                    name=wanted.name, error_code=code, error_message=message
                )
            )
        return CreatePartitionsResponse(results=tuple(results))

    async def _grow(self, wanted: CreatePartitionsTopic, validate_only: bool) -> None:
        topic = find_topic(self._logs, wanted.name)
        current = len(topic.partitions)
        if wanted.count < current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested "
                f"{wanted.count}.",
            )
        if wanted.count == current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
            )
        if wanted.assignments is not None:
            added = wanted.count - current
            if len(wanted.assignments) != added:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(wanted.assignments)} assignment(s) were specified.",
                )
            for assignment in wanted.assignments:
                if list(assignment.broker_ids) != [self._node_id]:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Assignment {list(assignment.broker_ids)} names brokers other than "
                        f"the only broker, {self._node_id}.",
                    )
        await self._logs.create_partitions(wanted.name, wanted.count, validate_only=validate_only)

    def error_response(self, request: Request, error_code: int) -> CreatePartitionsResponse:
        body: CreatePartitionsRequest = request.body
        return CreatePartitionsResponse(
            results=tuple(
                CreatePartitionsTopicResult(name=t.name, error_code=error_code) for t in body.topics
            )
        )
