"""A single consumer-group member for `consume --group`: the classic protocol.

JoinGroup (retrying once with the member id the broker assigns, KIP-394),
the leader range-assigns the topic's partitions among the members,
SyncGroup hands out assignments, OffsetFetch gives the starting offsets,
OffsetCommit records progress, Heartbeat keeps the membership alive and
LeaveGroup ends it. A rebalance signalled by a heartbeat or commit makes
the caller rejoin.
"""

from __future__ import annotations

import struct

import trio

from broker.client.group_offsets import fetch_committed
from broker.client.session import ClientError, ClientSession, check_error
from broker.client.topics import TopicInfo
from broker.protocol.api import ApiKey, decode_message, encode_message
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from broker.protocol.messages.consumer_protocol_assignment import TopicPartition
from broker.protocol.messages.join_group_request import JoinGroupRequestProtocol
from broker.protocol.messages.leave_group_request import MemberIdentity
from broker.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.sync_group_request import SyncGroupRequestAssignment

GROUP_KEYS = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.OFFSET_FETCH,
    ApiKey.OFFSET_COMMIT,
)
_PROTOCOL = "range"
_SESSION_TIMEOUT_MS = 10_000
_REBALANCE_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_S = 3.0
_VERSION = struct.Struct(">h")
_REJOIN = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION}


class RebalanceNeeded(Exception):
    """The group is rebalancing: rejoin and fetch the assignment again."""


def encode_versioned(body: object, version: int = 0) -> bytes:
    return _VERSION.pack(version) + b"".join(bytes(c) for c in encode_message(body, version))


def decode_versioned(cls: type, data: bytes | memoryview | None) -> object | None:
    if not data or len(data) < 2:
        return None
    (version,) = _VERSION.unpack_from(data)
    # A newer version's extra fields trail the ones we know: read what we can.
    version = min(version, int(getattr(cls, "MAX_VERSION", version)))
    decoded: object = decode_message(cls, memoryview(data)[2:], version)
    return decoded


def range_assign(members: list[str], partitions: tuple[int, ...]) -> dict[str, list[int]]:
    """Kafka's RangeAssignor for one topic: contiguous ranges, the first members
    getting one extra partition when the count does not divide evenly."""
    ordered = sorted(members)
    per_member, extra = divmod(len(partitions), len(ordered))
    assignment: dict[str, list[int]] = {}
    start = 0
    for i, member in enumerate(ordered):
        count = per_member + (1 if i < extra else 0)
        assignment[member] = list(partitions[start : start + count])
        start += count
    return assignment


class GroupMember:
    def __init__(self, session: ClientSession, group_id: str, info: TopicInfo) -> None:
        missing = [k for k in GROUP_KEYS if not session.supports(k)]
        if missing:
            raise ClientError(
                f"the broker does not support consumer groups (missing api keys {missing})"
            )
        self.session = session
        self.group_id = group_id
        self.info = info
        self.member_id = ""
        self.generation_id = -1
        self.assigned: list[int] = []
        self.next_heartbeat = 0.0

    async def join(self) -> list[int]:
        """Join (or rejoin) the group; returns the partitions assigned to us."""
        subscription = encode_versioned(ConsumerProtocolSubscription(topics=(self.info.name,)))
        for _ in range(10):
            response = await self.session.call(
                JoinGroupRequest(
                    group_id=self.group_id,
                    session_timeout_ms=_SESSION_TIMEOUT_MS,
                    rebalance_timeout_ms=_REBALANCE_TIMEOUT_MS,
                    member_id=self.member_id,
                    protocol_type="consumer",
                    protocols=(JoinGroupRequestProtocol(name=_PROTOCOL, metadata=subscription),),
                )
            )
            if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if response.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            check_error(response.error_code, f"JoinGroup {self.group_id!r}")
            self.member_id = response.member_id
            self.generation_id = response.generation_id
            assignments: tuple[SyncGroupRequestAssignment, ...] = ()
            if response.leader == response.member_id:
                members = [m.member_id for m in response.members]
                plan = range_assign(members, self.info.partitions)
                assignments = tuple(
                    SyncGroupRequestAssignment(
                        member_id=member,
                        assignment=encode_versioned(
                            ConsumerProtocolAssignment(
                                assigned_partitions=(
                                    TopicPartition(topic=self.info.name, partitions=tuple(parts)),
                                )
                            )
                        ),
                    )
                    for member, parts in plan.items()
                )
            sync = await self.session.call(
                SyncGroupRequest(
                    group_id=self.group_id,
                    generation_id=self.generation_id,
                    member_id=self.member_id,
                    protocol_type="consumer",
                    protocol_name=_PROTOCOL,
                    assignments=assignments,
                )
            )
            if sync.error_code in _REJOIN:
                continue
            check_error(sync.error_code, f"SyncGroup {self.group_id!r}")
            assignment = decode_versioned(ConsumerProtocolAssignment, sync.assignment)
            self.assigned = sorted(
                p
                for tp in getattr(assignment, "assigned_partitions", ())
                if tp.topic == self.info.name
                for p in tp.partitions
            )
            self.next_heartbeat = trio.current_time() + HEARTBEAT_INTERVAL_S
            return self.assigned
        raise ClientError(f"could not join group {self.group_id!r}: too many rebalances")

    async def committed(self) -> dict[int, int]:
        """Committed offsets of the assigned partitions (-1 when none)."""
        only = (self.info.name, tuple(self.assigned))
        offsets = await fetch_committed(self.session, self.group_id, only)
        return {partition: offset for (_, partition), offset in offsets.items()}

    async def commit(self, offsets: dict[int, int]) -> None:
        if not offsets:
            return
        body = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation_id,
            member_id=self.member_id,
            topics=(
                OffsetCommitRequestTopic(
                    name=self.info.name,
                    partitions=tuple(
                        OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                        for p, o in sorted(offsets.items())
                    ),
                ),
            ),
        )
        response = await self.session.call(body, minimum=2)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code in _REJOIN:
                    raise RebalanceNeeded()
                check_error(p.error_code, f"OffsetCommit {t.name}-{p.partition_index}")

    async def heartbeat_if_due(self) -> None:
        if trio.current_time() < self.next_heartbeat:
            return
        response = await self.session.call(
            HeartbeatRequest(
                group_id=self.group_id,
                generation_id=self.generation_id,
                member_id=self.member_id,
            )
        )
        self.next_heartbeat = trio.current_time() + HEARTBEAT_INTERVAL_S
        if response.error_code in _REJOIN:
            raise RebalanceNeeded()
        check_error(response.error_code, f"Heartbeat {self.group_id!r}")

    async def leave(self) -> None:
        if not self.member_id or not self.session.supports(ApiKey.LEAVE_GROUP):
            return
        version = self.session.version_for(ApiKey.LEAVE_GROUP)
        if version >= 3:
            body = LeaveGroupRequest(
                group_id=self.group_id, members=(MemberIdentity(member_id=self.member_id),)
            )
        else:
            body = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
        await self.session.request(body, version)
