"""Metadata (key 3): this broker, as advertised on the listener the request used.

Clients connect only to what Metadata advertises, so the broker list is
built per listener from `advertised.listeners` (wildcard host replaced by the
machine's name, port 0 by the bound port). Topics come from a topic source
(the log's, see `log_topics`); a broker without a log has none, and every
requested topic is unknown.

Topic ids in requests are accepted from v12, as Kafka does (v10 and v11 made
the name nullable in the schema but Kafka refuses ids there).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

from broker.errors import KafkaError
from broker.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_AUTHORIZED_OPERATIONS
from broker.net.request import Request
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import MetadataRequest, MetadataResponse
from broker.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponseTopic,
)

API_KEY = 3


TOPIC_IDS_FROM = 12


class TopicSource(Protocol):
    """What Metadata needs to know about topics (filled in by the log).

    `names` None means all topics; `topic_ids` are looked up by id (never
    created). Auto-creation may need the log, hence async.
    """

    async def describe_topics(
        self,
        names: Sequence[str] | None,
        allow_auto_create: bool,
        topic_ids: Sequence[uuid.UUID] = (),
        include_authorized_operations: bool = False,
    ) -> list[MetadataResponseTopic]: ...


class NoTopics:
    """The topic source of a broker without a log: every named topic is unknown."""

    async def describe_topics(
        self,
        names: Sequence[str] | None,
        allow_auto_create: bool,
        topic_ids: Sequence[uuid.UUID] = (),
        include_authorized_operations: bool = False,
    ) -> list[MetadataResponseTopic]:
        unknown_ids = [
            MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=i)
            for i in topic_ids
        ]
        if names is None:
            return unknown_ids
        return [
            MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
            for name in names
        ] + unknown_ids


class MetadataHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 12

    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        advertised: Callable[[str], tuple[str, int]],
        topics: TopicSource,
    ) -> None:
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._advertised = advertised
        self.topics = topics

    async def handle(self, request: Request) -> MetadataResponse:
        body: MetadataRequest = request.body
        host, port = self._advertised(request.context.listener_name)
        version = request.api_version
        topic_ids: list[uuid.UUID] = []
        # v0 has no "all topics" null: an empty list means all topics there.
        if body.topics is None or (version == 0 and not body.topics):
            names: list[str] | None = None
        else:
            names = []
            for topic in body.topics:
                if topic.topic_id.int and version < TOPIC_IDS_FROM:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        f"Topic IDs are not supported in requests for version {version}",
                    )
                if topic.name is not None:
                    names.append(topic.name)
                elif topic.topic_id.int:
                    topic_ids.append(topic.topic_id)
                else:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST, "a requested topic has neither name nor id"
                    )
        allow_auto_create = body.allow_auto_topic_creation if version >= 4 else True
        if topic_ids:
            allow_auto_create = False  # Kafka never creates topics looked up by id
        topics = await self.topics.describe_topics(
            names, allow_auto_create, topic_ids, body.include_topic_authorized_operations
        )
        return MetadataResponse(
            brokers=(MetadataResponseBroker(node_id=self._node_id, host=host, port=port),),
            cluster_id=self._cluster_id,
            controller_id=self._node_id,
            topics=tuple(topics),
            cluster_authorized_operations=(
                CLUSTER_AUTHORIZED_OPERATIONS
                if body.include_cluster_authorized_operations
                else AUTHORIZED_OPERATIONS_OMITTED
            ),
        )

    def error_response(self, request: Request, error_code: int) -> MetadataResponse:
        body: MetadataRequest = request.body
        return MetadataResponse(
            topics=tuple(
                MetadataResponseTopic(
                    error_code=error_code,
                    name=t.name if t.name is not None or request.api_version >= 12 else "",
                    topic_id=t.topic_id,
                )
                for t in body.topics or ()
            )
        )
