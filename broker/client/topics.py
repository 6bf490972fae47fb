"""Topic metadata as the client commands need it: partitions and topic ids."""

from __future__ import annotations

import uuid

import attrs
import tenacity

from broker.client.session import ClientError, ClientSession, check_error
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import MetadataRequest, MetadataResponse
from broker.protocol.messages.metadata_request import MetadataRequestTopic


@attrs.frozen
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


# A topic the broker has just auto-created may answer LEADER_NOT_AVAILABLE for a moment,
# as Kafka's does; producers retry, and so do we, for about a second.
_CREATION_RETRIES = 10
_CREATION_RETRY_S = 0.1


async def fetch_metadata(
    session: ClientSession, topics: list[str] | None, *, auto_create: bool = False
) -> MetadataResponse:
    """Metadata for `topics` (None: every topic).

    `auto_create` asks the broker to create missing topics, as kcat and Kafka's console
    producer do; the broker still decides (`auto.create.topics.enable`).
    """
    version = session.version_for(ApiKey.METADATA)
    if topics is None and version == 0:
        requested: tuple[MetadataRequestTopic, ...] | None = ()
    elif topics is None:
        requested = None
    else:
        requested = tuple(MetadataRequestTopic(name=name) for name in topics)
    body = MetadataRequest(topics=requested, allow_auto_topic_creation=auto_create)
    response: MetadataResponse = await session.request(body, version)
    return response


def _leader_not_available(response: MetadataResponse) -> bool:
    return [entry.error_code for entry in response.topics] == [ErrorCode.LEADER_NOT_AVAILABLE]


def _last_answer(state: tenacity.RetryCallState) -> MetadataResponse:
    assert state.outcome is not None
    answer: MetadataResponse = state.outcome.result()
    return answer


@tenacity.retry(
    retry=tenacity.retry_if_result(_leader_not_available),
    stop=tenacity.stop_after_attempt(_CREATION_RETRIES),
    wait=tenacity.wait_fixed(_CREATION_RETRY_S),
    retry_error_callback=_last_answer,  # still no leader: the caller reports the error
)
async def _metadata_once_led(
    session: ClientSession, topic: str, auto_create: bool
) -> MetadataResponse:
    """One topic's metadata, asked again while it has no leader yet."""
    return await fetch_metadata(session, [topic], auto_create=auto_create)


async def describe_topic(
    session: ClientSession, topic: str, *, auto_create: bool = False
) -> TopicInfo:
    """The topic's partitions; ClientError naming the error if it does not exist."""
    response = await _metadata_once_led(session, topic, auto_create)
    for entry in response.topics:
        if entry.name == topic:
            check_error(entry.error_code, f"topic {topic!r}")
            partitions = tuple(sorted(p.partition_index for p in entry.partitions))
            if not partitions:
                raise ClientError(f"topic {topic!r}: has no partitions")
            return TopicInfo(topic, entry.topic_id, partitions)
    raise ClientError(f"topic {topic!r}: UNKNOWN_TOPIC_OR_PARTITION")
