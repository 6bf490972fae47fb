"""The consumer group APIs ask what Kafka asks: READ on the group and DESCRIBE on every
topic subscribed by name to heartbeat, DESCRIBE on the group to describe it."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.errors import KafkaError
from broker.handlers.consumer_group_handlers import (
    ConsumerGroupDescribeHandler,
    ConsumerGroupHeartbeatHandler,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from broker.security.acl import AclOperation, ResourceType
from broker.security.authorizer import StandardAuthorizer
from tests.coordinator.test_group_authorization import coordinator
from tests.handlers.fake_log import FakeLog, FakeTopic
from tests.handlers.request_factory import BOB, make_request
from tests.security.acl_strategies import acl

GROUP = ResourceType.GROUP


def join_body(*topics: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m1",
        member_epoch=0,
        rebalance_timeout_ms=1000,
        subscribed_topic_names=topics,
        topic_partitions=(),
    )


async def test_heartbeats_need_the_group_and_every_named_topic(tmp_path: Path) -> None:
    authorizer = StandardAuthorizer(
        [
            acl("g", AclOperation.READ, resource_type=GROUP),
            acl("g", AclOperation.DESCRIBE, resource_type=GROUP),
            acl("t", AclOperation.DESCRIBE),
        ]
    )
    logs = FakeLog(FakeTopic("t", 2), FakeTopic("secret", 1))
    async with coordinator(tmp_path) as service:
        beat = ConsumerGroupHeartbeatHandler(service, logs, authorizer=authorizer)
        describe = ConsumerGroupDescribeHandler(service, logs, authorizer=authorizer)
        denied = await beat.handle(make_request(join_body("t", "secret"), 68, 1))
        assert denied.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert denied.error_message == "The following topics are unauthorized: secret"
        joined = await beat.handle(make_request(join_body("t"), 68, 1))
        assert joined.error_code == ErrorCode.NONE and joined.assignment is not None
        assert joined.assignment.topic_partitions[0].partitions == (0, 1)
        with pytest.raises(KafkaError) as refused:
            await beat.handle(make_request(join_body("t"), 68, 1, principal=BOB))
        assert refused.value.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED

        request = ConsumerGroupDescribeRequest(group_ids=("g",))
        mine = await describe.handle(make_request(request, 69, 0))
        assert mine.groups[0].error_code == ErrorCode.NONE
        assert mine.groups[0].members[0].assignment.topic_partitions[0].topic_name == "t"
        theirs = await describe.handle(make_request(request, 69, 0, principal=BOB))
        assert theirs.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
