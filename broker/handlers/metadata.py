"""Metadata (key 3): this broker, as advertised on the listener the request used.

Clients connect only to what Metadata advertises, so the broker list is
built per listener from `advertised.listeners` (wildcard host replaced by the
machine's name, port 0 by the bound port). Topics come from a topic source;
until the log exists there are none, and every requested topic is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from broker.net.request import Request
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import MetadataRequest, MetadataResponse
from broker.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponseTopic,
)

API_KEY = 3


class TopicSource(Protocol):
    """What Metadata needs to know about topics (filled in by the log)."""

    def describe_topics(
        self, names: Sequence[str] | None, allow_auto_create: bool
    ) -> list[MetadataResponseTopic]: ...


class NoTopics:
    """The topic source of a broker without a log: every named topic is unknown."""

    def describe_topics(
        self, names: Sequence[str] | None, allow_auto_create: bool
    ) -> list[MetadataResponseTopic]:
        if names is None:
            return []
        return [
            MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
            for name in names
        ]


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
        # v0 has no "all topics" null: an empty list means all topics there.
        if body.topics is None or (request.api_version == 0 and not body.topics):
            names: list[str] | None = None
        else:
            names = [t.name for t in body.topics if t.name is not None]
        allow_auto_create = body.allow_auto_topic_creation if request.api_version >= 4 else True
        return MetadataResponse(
            brokers=(MetadataResponseBroker(node_id=self._node_id, host=host, port=port),),
            cluster_id=self._cluster_id,
            controller_id=self._node_id,
            topics=tuple(self.topics.describe_topics(names, allow_auto_create)),
        )

    def error_response(self, request: Request, error_code: int) -> MetadataResponse:
        body: MetadataRequest = request.body
        names = [t.name for t in body.topics or () if t.name is not None]
        return MetadataResponse(
            topics=tuple(MetadataResponseTopic(error_code=error_code, name=n) for n in names)
        )
