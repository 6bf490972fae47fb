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
from broker.handlers.auth_helper import (
    TOPIC,
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
    cluster_authorized_operations,
)
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import MetadataRequest, MetadataResponse
from broker.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.topology import SingleProcessTopology, Topology

API_KEY = ApiKey.METADATA


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
        *,
        authorizer: Authorizer = ALLOW_ALL,
        auto_create_topics: bool = True,
        topology: Topology | None = None,
    ) -> None:
        self._cluster_id = cluster_id
        self.topics = topics
        self._authorizer = authorizer
        self._auto_create_topics = auto_create_topics
        # Every live broker as (node, host, port) on a listener, and the controller.
        self._topology = topology or SingleProcessTopology(node_id, advertised)

    async def handle(self, request: Request[MetadataRequest]) -> MetadataResponse:
        body = request.body
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
        if self._authorizer.enabled:
            topics = await self._describe_authorized(request, names, allow_auto_create, topic_ids)
        else:
            topics = await self.topics.describe_topics(
                names, allow_auto_create, topic_ids, body.include_topic_authorized_operations
            )
        brokers = tuple(
            MetadataResponseBroker(node_id=n, host=h, port=p, rack=self._topology.rack(n))
            for n, h, p in self._topology.brokers(request.context.listener_name)
        )
        return MetadataResponse(
            brokers=brokers,
            cluster_id=self._cluster_id,
            controller_id=self._topology.controller_id(),
            topics=tuple(topics),
            cluster_authorized_operations=cluster_authorized_operations(
                self._authorizer, request, body.include_cluster_authorized_operations
            ),
        )

    async def _describe_authorized(
        self,
        request: Request,
        names: list[str] | None,
        allow_auto_create: bool,
        topic_ids: list[uuid.UUID],
    ) -> list[MetadataResponseTopic]:
        """KafkaApis.getTopicMetadata with an authorizer: all-topics lists only what the
        principal may DESCRIBE; a named topic it may not describe is
        TOPIC_AUTHORIZATION_FAILED whether or not it exists; auto-creation needs CREATE
        on the cluster or the topic (a topic that would be created without it is
        TOPIC_AUTHORIZATION_FAILED too)."""
        auth = self._authorizer
        body: MetadataRequest = request.body
        result: list[MetadataResponseTopic] = []
        creatable: list[str] = []
        not_creatable: list[str] = []
        if names is not None:
            names = list(dict.fromkeys(names))
            describable = authorized_names(auth, request, AclOperation.DESCRIBE, TOPIC, names)
            for name in names:
                if name not in describable:
                    result.append(denied(name))
                elif (
                    allow_auto_create
                    and self._auto_create_topics
                    and not authorize_cluster(auth, request, AclOperation.CREATE)
                    and not authorize(auth, request, AclOperation.CREATE, TOPIC, name)
                ):
                    not_creatable.append(name)
                else:
                    creatable.append(name)
        found = await self.topics.describe_topics(
            None if names is None else creatable, allow_auto_create, topic_ids
        )
        if not_creatable:
            for topic in await self.topics.describe_topics(not_creatable, False):
                missing = topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.append(denied(topic.name or "") if missing else topic)
        for topic in found:
            if topic.name is not None and not authorize(
                auth, request, AclOperation.DESCRIBE, TOPIC, topic.name
            ):
                if names is None and topic.topic_id not in topic_ids:
                    continue  # listing all topics hides the ones it may not describe
                result.append(denied(None, topic.topic_id))
            else:
                result.append(topic)
        if not body.include_topic_authorized_operations:
            return result
        return [
            t._replace(
                topic_authorized_operations=authorized_operations(auth, request, TOPIC, t.name)
            )
            if t.error_code == ErrorCode.NONE and t.name is not None
            else t
            for t in result
        ]

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


def denied(name: str | None, topic_id: uuid.UUID | None = None) -> MetadataResponseTopic:
    """A topic the principal may not see: nothing about it but the error."""
    return MetadataResponseTopic(
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        name=name,
        topic_id=topic_id if topic_id is not None else uuid.UUID(int=0),
    )
