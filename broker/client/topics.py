"""Topic metadata as the client commands need it: partitions and topic ids."""

from __future__ import annotations

import uuid

import attrs

from broker.client.session import ClientError, ClientSession, check_error
from broker.protocol.messages import MetadataRequest, MetadataResponse
from broker.protocol.messages.metadata_request import MetadataRequestTopic

METADATA_KEY = 3


@attrs.frozen
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


async def fetch_metadata(session: ClientSession, topics: list[str] | None) -> MetadataResponse:
    """Metadata for `topics` (None: every topic), never auto-creating one."""
    version = session.version_for(METADATA_KEY)
    if topics is None and version == 0:
        requested: tuple[MetadataRequestTopic, ...] | None = ()
    elif topics is None:
        requested = None
    else:
        requested = tuple(MetadataRequestTopic(name=name) for name in topics)
    body = MetadataRequest(topics=requested, allow_auto_topic_creation=False)
    response: MetadataResponse = await session.request(body, version)
    return response


async def describe_topic(session: ClientSession, topic: str) -> TopicInfo:
    """The topic's partitions; ClientError naming the error if it does not exist."""
    response = await fetch_metadata(session, [topic])
    for entry in response.topics:
        if entry.name == topic:
            check_error(entry.error_code, f"topic {topic!r}")
            partitions = tuple(sorted(p.partition_index for p in entry.partitions))
            if not partitions:
                raise ClientError(f"topic {topic!r}: has no partitions")
            return TopicInfo(topic, entry.topic_id, partitions)
    raise ClientError(f"topic {topic!r}: UNKNOWN_TOPIC_OR_PARTITION")
