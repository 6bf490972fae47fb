"""The group APIs ask what Kafka asks: DESCRIBE a group to find or describe it, READ to
be a member or commit, DELETE to delete it or its offsets, and READ/DESCRIBE on each
topic whose offsets are committed or fetched. Handlers are called directly with
requests from chosen principals, on a running coordinator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from broker.config import BrokerConfig
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.errors import KafkaError
from broker.handlers.group_admin_handlers import (
    DeleteGroupsHandler,
    DescribeGroupsHandler,
    ListGroupsHandler,
)
from broker.handlers.group_handlers import (
    FindCoordinatorHandler,
    HeartbeatHandler,
    JoinGroupHandler,
    LeaveGroupHandler,
    SyncGroupHandler,
)
from broker.handlers.offset_handlers import (
    OffsetCommitHandler,
    OffsetDeleteHandler,
    OffsetFetchHandler,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
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
    OffsetFetchRequestTopics,
)
from broker.security.acl import AclOperation, ResourceType, operations_bit_field
from broker.security.authorizer import StandardAuthorizer
from broker.wiring.group_coordinator import coordinator_config
from tests.handlers.request_factory import ALICE, BOB, make_request
from tests.security.acl_strategies import acl

Op = AclOperation
GROUP = ResourceType.GROUP
GAF = ErrorCode.GROUP_AUTHORIZATION_FAILED
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
ADMIN = "User:admin"


@asynccontextmanager
async def coordinator(tmp_path: Path) -> AsyncIterator[GroupCoordinatorService]:
    service = GroupCoordinatorService(coordinator_config(BrokerConfig({})), tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        yield service
        nursery.cancel_scope.cancel()


def commit_body(group: str, *topics: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        topics=tuple(
            OffsetCommitRequestTopic(
                name=t,
                partitions=(OffsetCommitRequestPartition(partition_index=0, committed_offset=5),),
            )
            for t in topics
        ),
    )


def fetch_group(group: str, *topics: str, all_topics: bool = False) -> OffsetFetchRequest:
    wanted = (
        None
        if all_topics
        else tuple(OffsetFetchRequestTopics(name=t, partition_indexes=(0,)) for t in topics)
    )
    return OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=wanted),))


def committed(response: object) -> dict[str, tuple[int, int]]:
    group = response.groups[0]  # type: ignore[attr-defined]
    return {
        t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code) for t in group.topics
    }


async def test_commit_and_fetch_need_the_group_and_each_topic(tmp_path: Path) -> None:
    authorizer = StandardAuthorizer(
        [acl("g", Op.READ, resource_type=GROUP), acl("t", Op.READ)], super_users=[ADMIN]
    )
    async with coordinator(tmp_path) as service:
        commit = OffsetCommitHandler(service, authorizer=authorizer)
        fetch = OffsetFetchHandler(service, authorizer=authorizer)
        response = await commit.handle(make_request(commit_body("g", "t", "u"), 8, 9))
        assert isinstance(response, OffsetCommitResponse)  # journals: answered at once
        codes = {t.name: t.partitions[0].error_code for t in response.topics}
        assert codes == {"t": ErrorCode.NONE, "u": TAF}
        with pytest.raises(KafkaError) as refused:
            await commit.handle(make_request(commit_body("g", "t"), 8, 9, principal=BOB))
        assert refused.value.error_code == GAF

        await commit.handle(make_request(commit_body("g", "u"), 8, 9, principal=ADMIN))
        named = await fetch.handle(make_request(fetch_group("g", "t", "u"), 9, 9))
        assert committed(named) == {"t": (5, ErrorCode.NONE), "u": (-1, TAF)}
        every = await fetch.handle(make_request(fetch_group("g", all_topics=True), 9, 9))
        assert committed(every) == {"t": (5, ErrorCode.NONE)}  # u is hidden
        admin = await fetch.handle(
            make_request(fetch_group("g", all_topics=True), 9, 9, principal=ADMIN)
        )
        assert committed(admin) == {"t": (5, ErrorCode.NONE), "u": (5, ErrorCode.NONE)}
        bob = await fetch.handle(make_request(fetch_group("g", "t"), 9, 9, principal=BOB))
        assert bob.groups[0].error_code == GAF and not bob.groups[0].topics


async def test_list_describe_and_delete_groups_are_filtered_per_group(tmp_path: Path) -> None:
    authorizer = StandardAuthorizer(
        [acl("g", Op.DESCRIBE, resource_type=GROUP)], super_users=[ADMIN]
    )
    async with coordinator(tmp_path) as service:
        commit = OffsetCommitHandler(service, authorizer=authorizer)
        for group in ("g", "h"):
            await commit.handle(make_request(commit_body(group, "t"), 8, 9, principal=ADMIN))
        listing = ListGroupsHandler(service, authorizer=authorizer)
        listed = await listing.handle(make_request(ListGroupsRequest(), 16, 5))
        assert [g.group_id for g in listed.groups] == ["g"]
        authorizer.add_acls([acl("kafka-cluster", Op.DESCRIBE, resource_type=ResourceType.CLUSTER)])
        listed = await listing.handle(make_request(ListGroupsRequest(), 16, 5))
        assert sorted(g.group_id for g in listed.groups) == ["g", "h"]

        describe = DescribeGroupsHandler(service, authorizer=authorizer)
        body = DescribeGroupsRequest(groups=("g", "h"), include_authorized_operations=True)
        described = {
            g.group_id: g for g in (await describe.handle(make_request(body, 15, 5))).groups
        }
        assert described["h"].error_code == GAF
        assert described["g"].error_code == ErrorCode.NONE
        assert described["g"].authorized_operations == operations_bit_field([Op.DESCRIBE])

        delete = DeleteGroupsHandler(service, authorizer=authorizer)
        authorizer.add_acls([acl("h", Op.DELETE, resource_type=GROUP)])
        deleted = await delete.handle(
            make_request(DeleteGroupsRequest(groups_names=("g", "h")), 42, 2)
        )
        assert {r.group_id: r.error_code for r in deleted.results} == {
            "g": GAF,
            "h": ErrorCode.NONE,
        }


async def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(
    tmp_path: Path,
) -> None:
    authorizer = StandardAuthorizer(
        [acl("g", Op.DELETE, resource_type=GROUP), acl("t", Op.READ)], super_users=[ADMIN]
    )
    async with coordinator(tmp_path) as service:
        commit = OffsetCommitHandler(service, authorizer=authorizer)
        await commit.handle(make_request(commit_body("g", "t", "u"), 8, 9, principal=ADMIN))
        handler = OffsetDeleteHandler(service, authorizer=authorizer)
        body = OffsetDeleteRequest(
            group_id="g",
            topics=tuple(
                OffsetDeleteRequestTopic(
                    name=t, partitions=(OffsetDeleteRequestPartition(partition_index=0),)
                )
                for t in ("t", "u")
            ),
        )
        response = await handler.handle(make_request(body, 47, 0))
        codes = {t.name: t.partitions[0].error_code for t in response.topics}
        assert codes == {"t": ErrorCode.NONE, "u": TAF}
        with pytest.raises(KafkaError) as refused:
            await handler.handle(make_request(body, 47, 0, principal=BOB))
        assert refused.value.error_code == GAF


async def test_find_coordinator_and_join_need_describe_and_read_on_the_group(
    tmp_path: Path,
) -> None:
    authorizer = StandardAuthorizer([acl("g", Op.DESCRIBE, resource_type=GROUP)])
    find = FindCoordinatorHandler(1, lambda _: ("h", 9092), authorizer=authorizer)
    old = await find.handle(make_request(FindCoordinatorRequest(key="g"), 10, 3))
    assert old.error_code == ErrorCode.NONE and old.node_id == 1
    refused = await find.handle(make_request(FindCoordinatorRequest(key="g"), 10, 3, BOB))
    assert refused.error_code == GAF
    batch = await find.handle(
        make_request(FindCoordinatorRequest(coordinator_keys=("g", "other")), 10, 4)
    )
    assert [c.error_code for c in batch.coordinators] == [ErrorCode.NONE, GAF]
    async with coordinator(tmp_path) as service:
        join = JoinGroupHandler(service, authorizer=authorizer)
        body = JoinGroupRequest(group_id="g", session_timeout_ms=10_000, protocol_type="consumer")
        with pytest.raises(KafkaError) as not_member:
            await join.handle(make_request(body, 11, 9, principal=ALICE))  # DESCRIBE is not READ
        assert not_member.value.error_code == GAF
        assert join.error_response(make_request(body, 11, 9), GAF).error_code == GAF


@pytest.mark.parametrize(
    ("handler_class", "body", "api_key"),
    [
        (SyncGroupHandler, SyncGroupRequest(group_id="g", member_id="m"), 14),
        (HeartbeatHandler, HeartbeatRequest(group_id="g", member_id="m"), 12),
        (LeaveGroupHandler, LeaveGroupRequest(group_id="g"), 13),
    ],
)
async def test_members_need_read_on_the_group(
    tmp_path: Path, handler_class: type, body: object, api_key: int
) -> None:
    authorizer = StandardAuthorizer([acl("g", Op.READ, resource_type=GROUP)])
    async with coordinator(tmp_path) as service:
        handler = handler_class(service, authorizer=authorizer)
        with pytest.raises(KafkaError) as refused:
            await handler.handle(make_request(body, api_key, 3, principal=BOB))
        assert refused.value.error_code == GAF
        answered = await handler.handle(make_request(body, api_key, 3))
        assert answered.error_code != GAF  # alice gets the coordinator's own answer
