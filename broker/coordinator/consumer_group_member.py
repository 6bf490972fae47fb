"""A member of a KIP-848 consumer group, as Kafka's ConsumerGroupMember: an immutable
value the group replaces on every change, so a heartbeat's effect is one assignment."""

from __future__ import annotations

import enum

import attrs

TopicPartitionSet = frozenset[tuple[str, int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
"""A static member leaving for a while: it keeps its assignment until its session ends."""


class MemberState(enum.Enum):
    """Kafka's MemberState (CurrentAssignmentBuilder's states)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    """It must acknowledge (by no longer listing them) the partitions it is losing."""
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    """Part of its target is still owned by members that have not revoked it yet."""


@attrs.frozen
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitionSet = frozenset()
    pending_revocation: TopicPartitionSet = frozenset()

    @property
    def owned(self) -> TopicPartitionSet:
        """What it may still be consuming: no other member may be given these."""
        return self.assigned | self.pending_revocation
