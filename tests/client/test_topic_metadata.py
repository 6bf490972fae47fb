"""describe_topic asks again while a topic just created has no leader, then gives up."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio.testing

from broker.client.session import ClientError
from broker.client.topics import describe_topic
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import MetadataResponse
from broker.protocol.messages.metadata_response import (
    MetadataResponsePartition,
    MetadataResponseTopic,
)

TOPIC_ID = uuid.UUID(int=7)


def answer(error_code: int) -> MetadataResponse:
    partitions = () if error_code else (MetadataResponsePartition(partition_index=0),)
    topic = MetadataResponseTopic(
        error_code=error_code, name="t", topic_id=TOPIC_ID, partitions=partitions
    )
    return MetadataResponse(topics=(topic,))


class ScriptedSession:
    """Answers Metadata from a script; counts the requests."""

    def __init__(self, *answers: MetadataResponse) -> None:
        self.answers = list(answers)
        self.requests = 0

    def version_for(self, api_key: int, minimum: int = 0, maximum: int | None = None) -> int:
        return 12

    async def request(self, body: Any, version: int, timeout_s: float = 30.0) -> Any:
        self.requests += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


async def test_a_topic_without_a_leader_yet_is_asked_for_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    session = ScriptedSession(
        answer(ErrorCode.LEADER_NOT_AVAILABLE), answer(ErrorCode.LEADER_NOT_AVAILABLE), answer(0)
    )
    info = await describe_topic(session, "t")  # type: ignore[arg-type]
    assert (info.topic_id, info.partitions, session.requests) == (TOPIC_ID, (0,), 3)


async def test_a_topic_that_never_gets_a_leader_is_reported_after_ten_tries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    session = ScriptedSession(answer(ErrorCode.LEADER_NOT_AVAILABLE))
    started = trio.current_time()
    with pytest.raises(ClientError, match="LEADER_NOT_AVAILABLE"):
        await describe_topic(session, "t")  # type: ignore[arg-type]
    assert session.requests == 10
    assert trio.current_time() - started == pytest.approx(0.9)


async def test_other_errors_are_not_asked_again(autojump_clock: trio.testing.MockClock) -> None:
    session = ScriptedSession(answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    with pytest.raises(ClientError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        await describe_topic(session, "t")  # type: ignore[arg-type]
    assert session.requests == 1
