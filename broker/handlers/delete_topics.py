"""DeleteTopics (key 20): by name (v0-v5) or by name or id (v6)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable

from broker.errors import KafkaError
from broker.handlers.auth_helper import TOPIC, authorize
from broker.handlers.log_view import LogManagerView
from broker.handlers.topic_resource import find_topic
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from broker.protocol.messages.delete_topics_response import DeletableTopicResult
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.DELETE_TOPICS
TOPIC_IDS_FROM = 6
ZERO_UUID = uuid.UUID(int=0)


class DeleteTopicsHandler:
    api_key = API_KEY
    min_version = 1
    max_version = 6

    def __init__(
        self,
        log_manager: LogManagerView,
        deletion_enabled: bool,
        on_deleted: Callable[[str], None] = lambda _topic: None,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._logs = log_manager
        self._enabled = deletion_enabled
        self._on_deleted = on_deleted
        self._authorizer = authorizer

    async def handle(self, request: Request) -> DeleteTopicsResponse:
        wanted = requested_topics(request)
        counts = Counter(wanted)
        results = []
        for name, topic_id in wanted:
            try:
                if not self._enabled:
                    raise KafkaError(
                        ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
                    )
                if counts[(name, topic_id)] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                name, topic_id = await self._delete(request, name, topic_id)
                code, message = ErrorCode.NONE, None
            except KafkaError as exc:
                code, message = exc.error_code, exc.message
            results.append(
                DeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=code, error_message=message
                )
            )
        return DeleteTopicsResponse(responses=tuple(results))

    async def _delete(
        self, request: Request, name: str | None, topic_id: uuid.UUID
    ) -> tuple[str | None, uuid.UUID]:
        if name is not None and topic_id != ZERO_UUID:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, "Both topic name and topic id were set; set only one."
            )
        if name is None:
            topic = self._logs.topic_by_id(topic_id)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"Topic id {topic_id} does not exist.")
        else:
            # Kafka checks authorization first: an unauthorized name is not told whether
            # it exists.
            self._check_delete(request, name)
            topic = find_topic(self._logs, name)
        self._check_delete(request, topic.name)
        await self._logs.delete_topic(topic.name)
        self._on_deleted(topic.name)
        return topic.name, topic.topic_id

    def _check_delete(self, request: Request, name: str) -> None:
        if not authorize(self._authorizer, request, AclOperation.DELETE, TOPIC, name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")

    def error_response(self, request: Request, error_code: int) -> DeleteTopicsResponse:
        return DeleteTopicsResponse(
            responses=tuple(
                DeletableTopicResult(name=name, topic_id=topic_id, error_code=error_code)
                for name, topic_id in requested_topics(request)
            )
        )


def requested_topics(request: Request) -> list[tuple[str | None, uuid.UUID]]:
    body: DeleteTopicsRequest = request.body
    if request.api_version >= TOPIC_IDS_FROM:
        return [(t.name, t.topic_id) for t in body.topics]
    return [(name, ZERO_UUID) for name in body.topic_names]
