"""ConsumerGroupHeartbeat, ConsumerGroupDescribe and the older group APIs meeting a
consumer group, on a broker in the test's Trio run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from broker.client.connection import KafkaConnection
from broker.coordinator.consumer_group import ConsumerGroupConfig, HeartbeatParams
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import CoordinatorConfig
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CreateTopicsRequest,
    DescribeGroupsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from broker.protocol.messages.consumer_group_heartbeat_request import TopicPartitions
from broker.protocol.messages.create_topics_request import CreatableTopic
from broker.protocol.messages.join_group_request import JoinGroupRequestProtocol
from broker.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.offset_delete_request import (
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from broker.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from tests.integration.broker_harness import connect, running_broker
from tests.product.test_client import Client


async def heartbeat(conn: KafkaConnection, **fields: Any) -> Any:
    return await conn.request(ConsumerGroupHeartbeatRequest(**fields), 1)


async def join(conn: KafkaConnection, group: str, member: str, topic: str) -> Any:
    return await heartbeat(
        conn,
        group_id=group,
        member_id=member,
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=(topic,),
        topic_partitions=(),
    )


async def classic_join(conn: KafkaConnection, group: str, member: str) -> Any:
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id=member,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    return await conn.request(request, 5)


async def test_consumer_group_apis_end_to_end(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        created = await conn.request(
            CreateTopicsRequest(
                topics=(CreatableTopic(name="t", num_partitions=2, replication_factor=1),),
                timeout_ms=5000,
            ),
            7,
        )
        assert created.topics[0].error_code == ErrorCode.NONE
        topic_id = created.topics[0].topic_id

        joined = await join(conn, "g", "m1", "t")
        assert joined.error_code == ErrorCode.NONE
        assert joined.member_epoch == 1
        assert joined.assignment.topic_partitions[0].topic_id == topic_id
        assert joined.assignment.topic_partitions[0].partitions == (0, 1)

        # A second member waits until the first acknowledges its revocation.
        second = await join(conn, "g", "m2", "t")
        assert (second.member_epoch, second.assignment.topic_partitions) == (2, ())
        revoke = await heartbeat(
            conn,
            group_id="g",
            member_id="m1",
            member_epoch=1,
            topic_partitions=(TopicPartitions(topic_id=topic_id, partitions=(0, 1)),),
        )
        assert revoke.member_epoch == 1
        kept = revoke.assignment.topic_partitions[0].partitions
        assert len(kept) == 1
        acked = await heartbeat(
            conn,
            group_id="g",
            member_id="m1",
            member_epoch=1,
            topic_partitions=(TopicPartitions(topic_id=topic_id, partitions=kept),),
        )
        assert acked.member_epoch == 2
        given = await heartbeat(conn, group_id="g", member_id="m2", member_epoch=2)
        assert given.assignment.topic_partitions[0].partitions == tuple({0, 1} - set(kept))

        described = await conn.request(ConsumerGroupDescribeRequest(group_ids=("g", "nope")), 0)
        group, missing = described.groups
        assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Stable", 2, 2)
        assert group.assignor_name == "uniform"
        assert sorted(m.member_id for m in group.members) == ["m1", "m2"]
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND

        listed = await conn.request(ListGroupsRequest(types_filter=("consumer",)), 5)
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
            ("g", "consumer", "Stable")
        ]
        classic_only = await conn.request(ListGroupsRequest(types_filter=("classic",)), 5)
        assert classic_only.groups == ()
        old_describe = await conn.request(DescribeGroupsRequest(groups=("g",)), 5)
        assert old_describe.groups[0].group_state == "Dead"  # as Kafka below v6

        # The test client shows the group's type, epochs and members with --state, and
        # its partitions with their consumers by default, as for a classic group.
        cli = Client(server)
        table = (await cli.ok("groups", "describe", "g")).decode()
        assert {line.split()[6] for line in table.splitlines()[2:]} == {"m1", "m2"}
        shown = (await cli.ok("groups", "describe", "g", "--state")).decode()
        assert "group g: type consumer, state Stable, group epoch 2" in shown
        assert "member m1 epoch 2" in shown and "member m2 epoch 2" in shown
        assert "g\tStable\tconsumer\tconsumer" in (await cli.ok("groups", "list")).decode()

        # OffsetCommit v9 carries the member epoch.
        def commit(member: str, epoch: int, version: int = 9) -> OffsetCommitRequest:
            return OffsetCommitRequest(
                group_id="g",
                generation_id_or_member_epoch=epoch,
                member_id=member,
                topics=(
                    OffsetCommitRequestTopic(
                        name="t",
                        partitions=(
                            OffsetCommitRequestPartition(partition_index=0, committed_offset=7),
                        ),
                    ),
                ),
            )

        ok = await conn.request(commit("m1", 2), 9)
        assert ok.topics[0].partitions[0].error_code == ErrorCode.NONE
        stale = await conn.request(commit("m1", 5), 9)
        assert stale.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
        unknown = await conn.request(commit("zz", 2), 9)
        assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
        fetched = await conn.request(
            OffsetFetchRequest(
                group_id="g", topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0,)),)
            ),
            7,
        )
        assert fetched.topics[0].partitions[0].committed_offset == 7
        # OffsetFetch v9 names the member and its epoch: Kafka checks them exactly.
        for member, epoch, error in (
            ("m1", 2, ErrorCode.NONE),
            ("m1", 1, ErrorCode.STALE_MEMBER_EPOCH),
            ("zz", 2, ErrorCode.UNKNOWN_MEMBER_ID),
        ):
            group = OffsetFetchRequestGroup(
                group_id="g",
                member_id=member,
                member_epoch=epoch,
                topics=(OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),),
            )
            answer = (await conn.request(OffsetFetchRequest(groups=(group,)), 9)).groups[0]
            assert answer.error_code == error
            if error is ErrorCode.NONE:
                assert answer.topics[0].partitions[0].committed_offset == 7
        deleted = await conn.request(
            OffsetDeleteRequest(
                group_id="g",
                topics=(
                    OffsetDeleteRequestTopic(
                        name="t", partitions=(OffsetDeleteRequestPartition(partition_index=0),)
                    ),
                ),
            ),
            0,
        )
        subscribed = deleted.topics[0].partitions[0].error_code
        assert subscribed == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

        # A classic member cannot join the consumer group while it has members.
        refused = await classic_join(conn, "g", "")
        assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

        # Both leave; the empty group keeps its offsets and may become classic.
        for member in ("m1", "m2"):
            left = await heartbeat(conn, group_id="g", member_id=member, member_epoch=-1)
            assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)
        classic = await classic_join(conn, "g", "")
        assert classic.error_code == ErrorCode.MEMBER_ID_REQUIRED
        # ...and a consumer-protocol member cannot join a classic group with members.
        await classic_join(conn, "g", classic.member_id)
        not_consumer = await join(conn, "g", "m3", "t")
        assert not_consumer.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        await conn.aclose()


async def test_malformed_heartbeats_get_kafkas_errors(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        cases = [
            ({"group_id": "", "member_id": "m", "member_epoch": 0}, ErrorCode.INVALID_REQUEST),
            ({"group_id": "g", "member_id": "", "member_epoch": 0}, ErrorCode.INVALID_REQUEST),
            ({"group_id": "g", "member_id": "m", "member_epoch": 0}, ErrorCode.INVALID_REQUEST),
            ({"group_id": "g", "member_id": "m", "member_epoch": -3}, ErrorCode.INVALID_REQUEST),
            ({"group_id": "g", "member_id": "m", "member_epoch": 4}, ErrorCode.UNKNOWN_MEMBER_ID),
            (
                {
                    "group_id": "g",
                    "member_id": "m",
                    "member_epoch": 0,
                    "rebalance_timeout_ms": 1000,
                    "subscribed_topic_names": ("t",),
                    "server_assignor": "sticky",
                },
                ErrorCode.UNSUPPORTED_ASSIGNOR,
            ),
            (
                {
                    "group_id": "g",
                    "member_id": "m",
                    "member_epoch": 0,
                    "rebalance_timeout_ms": 1000,
                    "subscribed_topic_regex": "[",
                },
                ErrorCode.INVALID_REGULAR_EXPRESSION,
            ),
        ]
        for fields, expected in cases:
            response = await heartbeat(conn, **fields)
            assert response.error_code == expected, fields
            assert response.error_message
        await conn.aclose()


async def test_the_service_fences_a_silent_consumer_group_member_on_trios_clock(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = CoordinatorConfig(consumer=ConsumerGroupConfig(session_timeout_ms=3000))
    service = GroupCoordinatorService(config, tmp_path)
    topics = {"t": 2}
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        for member in ("m1", "m2"):
            joined = service.consumer_group_heartbeat(
                "g",
                HeartbeatParams(
                    member,
                    0,
                    rebalance_timeout_ms=10000,
                    subscribed_topic_names=("t",),
                    owned=frozenset(),
                ),
                1,
                topics,
            )
            assert joined.error is ErrorCode.NONE
        group = service.consumer_groups.groups["g"]
        epoch, owned = group.members["m1"].member_epoch, group.members["m1"].assigned
        for _ in range(3):  # m1 keeps beating (and revoking when told); m2 goes silent
            await trio.sleep(2)
            alive = service.consumer_group_heartbeat(
                "g", HeartbeatParams("m1", epoch, owned=owned), 1, topics
            )
            assert alive.error is ErrorCode.NONE
            epoch = alive.member_epoch
            owned = owned if alive.assignment is None else alive.assignment
        assert sorted(group.members) == ["m1"]
        assert trio.current_time() < 7
        nursery.cancel_scope.cancel()
