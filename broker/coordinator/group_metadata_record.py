"""A classic group's GroupMetadata record: what Kafka's GroupMetadataManager stores in
`__consumer_offsets` when a rebalance completes (storeGroup) and when the group empties,
and loads when it becomes the group's coordinator again.

Without it a coordinator that restarts knows a group's offsets but not its members, so
every member's next commit or heartbeat fails with UNKNOWN_MEMBER_ID and the group
rejoins. With it the group comes back Stable in its last completed generation and its
members carry on (Kafka's loadGroup; a rebalance the crash interrupted is not in the
record, so its members hear ILLEGAL_GENERATION and rejoin, as with Kafka).
"""

from __future__ import annotations

from broker.coordinator.classic_group import ClassicGroup
from broker.coordinator.group_state import GroupState
from broker.coordinator.member_metadata import MemberMetadata
from broker.coordinator.offset_store import GroupRecord, MemberRecord


def group_metadata_record(group: ClassicGroup, empty_since_ms: int | None) -> GroupRecord:
    """The record of `group` now; members only once Stable (their assignment is known)."""
    protocol = group.protocol_name if group.state is GroupState.STABLE else None
    members: tuple[MemberRecord, ...] = ()
    if protocol is not None:
        members = tuple(
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol),
                m.assignment,
            )
            for m in group.members.values()
        )
    return GroupRecord(
        group.protocol_type or "",
        empty_since_ms,
        group.generation_id,
        protocol,
        group.leader_id if members else None,
        members,
    )


def load_group(group: ClassicGroup, record: GroupRecord, now: float) -> None:
    """Give a freshly created group its stored generation and members; each member gets
    a fresh session deadline from `now` (Kafka's onGroupLoaded)."""
    protocol = record.protocol_name
    if protocol is None or not record.members:
        group.load(record.generation_id, None, None, ())
        return
    members = [
        MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            protocol_type=record.protocol_type,
            protocols=((protocol, m.subscription),),
            assignment=m.assignment,
            heartbeat_deadline_ms=now + m.session_timeout_ms,
        )
        for m in record.members
    ]
    group.load(record.generation_id, protocol, record.leader_id, members)
