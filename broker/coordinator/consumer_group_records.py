"""A KIP-848 consumer group as Kafka's group coordinator records it, so the group
survives its coordinator: Kafka's ConsumerGroupMetadata, ConsumerGroupPartitionMetadata,
ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignmentMember,
ConsumerGroupTargetAssignmentMetadata and ConsumerGroupCurrentMemberAssignment records,
written as the coordinator's journal records (`offset_store.py`; in `__consumer_offsets`
on hosts, `replicated_offset_store.py`) and replayed when a coordinator loads them.

Each record is `{"t": kind, "g": group, "m": member (member records only), "v": value}`,
a null value being Kafka's tombstone. Rather than each change of `ConsumerGroup`
writing its own records, the coordinator compares the group's records now with the
ones last written (`changed_records`) after every operation: what differs is written,
what is gone gets a tombstone, in the order Kafka writes them. Heartbeats that change
nothing write nothing, as with Kafka. Session timers are not recorded: a loaded member
gets a fresh session (Kafka's onLoaded), so only members that then stay silent for their
session timeout are removed.

Topics are named, not identified by topic id as in Kafka's records: the group works on
names, and only this broker reads the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from broker.coordinator.consumer_group import ConsumerGroup, ConsumerGroupConfig
from broker.coordinator.consumer_group_member import (
    ConsumerGroupMember,
    MemberState,
    TopicPartitionSet,
)

GROUP_METADATA = "cgm"
"""ConsumerGroupMetadata: the group epoch."""
PARTITION_METADATA = "cgp"
"""ConsumerGroupPartitionMetadata: partition counts of the subscribed topics."""
MEMBER_METADATA = "cgmm"
"""ConsumerGroupMemberMetadata: a member's subscription and client."""
TARGET_ASSIGNMENT_MEMBER = "cgtm"
"""ConsumerGroupTargetAssignmentMember: a member's target partitions."""
TARGET_ASSIGNMENT_METADATA = "cgta"
"""ConsumerGroupTargetAssignmentMetadata: the assignment epoch."""
CURRENT_MEMBER_ASSIGNMENT = "cgca"
"""ConsumerGroupCurrentMemberAssignment: a member's epochs, state and partitions."""

WRITE_ORDER = (
    MEMBER_METADATA,
    GROUP_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    CURRENT_MEMBER_ASSIGNMENT,
)
"""Kafka's order within one heartbeat's records."""
TOMBSTONE_ORDER = (
    CURRENT_MEMBER_ASSIGNMENT,
    TARGET_ASSIGNMENT_MEMBER,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_METADATA,
    PARTITION_METADATA,
    GROUP_METADATA,
)
"""Kafka's order when a member or the group goes (createGroupTombstoneRecords)."""
KINDS = frozenset(WRITE_ORDER)
MEMBER_KINDS = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})

RecordKey = tuple[str, str]
"""(kind, member id; "" for the group's own records)."""
GroupRecords = dict[RecordKey, dict[str, Any]]
"""One group's live records: each key's last value."""


def _partitions(partitions: TopicPartitionSet) -> list[list[Any]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [[topic, parts] for topic, parts in by_topic.items()]


def _partition_set(value: Iterable[list[Any]]) -> TopicPartitionSet:
    return frozenset((str(topic), int(p)) for topic, parts in value for p in parts)


def _member_records(member: ConsumerGroupMember) -> GroupRecords:
    member_id = member.member_id
    return {
        (MEMBER_METADATA, member_id): {
            "instance": member.instance_id,
            "rack": member.rack_id,
            "client": member.client_id,
            "host": member.client_host,
            "topics": list(member.subscribed_topic_names),
            "regex": member.subscribed_topic_regex,
            "rebalance_ms": member.rebalance_timeout_ms,
            "assignor": member.server_assignor,
        },
        (CURRENT_MEMBER_ASSIGNMENT, member_id): {
            "epoch": member.member_epoch,
            "previous": member.previous_member_epoch,
            "state": member.state.value,
            "assigned": _partitions(member.assigned),
            "revoking": _partitions(member.pending_revocation),
        },
    }


def group_records(group: ConsumerGroup) -> GroupRecords:
    """What the records of `group` say now."""
    records: GroupRecords = {
        (GROUP_METADATA, ""): {"epoch": group.group_epoch},
        (PARTITION_METADATA, ""): {
            "topics": [[t, n] for t, n in sorted(group.subscribed_partitions.items())]
        },
        (TARGET_ASSIGNMENT_METADATA, ""): {"epoch": group.assignment_epoch},
    }
    for member in group.members.values():
        records |= _member_records(member)
    for member_id, partitions in group.target.items():
        records[(TARGET_ASSIGNMENT_MEMBER, member_id)] = {"partitions": _partitions(partitions)}
    return records


def journal_record(group_id: str, key: RecordKey, value: dict[str, Any] | None) -> dict[str, Any]:
    kind, member_id = key
    record: dict[str, Any] = {"t": kind, "g": group_id, "v": value}
    if kind in MEMBER_KINDS:
        record["m"] = member_id
    return record


def record_key(record: Mapping[str, Any]) -> RecordKey:
    kind = str(record["t"])
    if kind not in KINDS:
        raise ValueError(f"not a consumer group record: {kind!r}")
    return kind, str(record["m"]) if kind in MEMBER_KINDS else ""


def changed_records(
    group_id: str, written: Mapping[RecordKey, dict[str, Any]], now: Mapping[RecordKey, Any]
) -> list[dict[str, Any]]:
    """The journal records that take the group from `written` to `now`: tombstones of
    the keys gone, then the keys whose value changed, each in Kafka's order."""
    gone = [key for key in written if key not in now]
    changed = [key for key, value in now.items() if written.get(key) != value]
    tombstones = sorted(gone, key=lambda k: (TOMBSTONE_ORDER.index(k[0]), k[1]))
    upserts = sorted(changed, key=lambda k: (WRITE_ORDER.index(k[0]), k[1]))
    return [journal_record(group_id, key, None) for key in tombstones] + [
        journal_record(group_id, key, now[key]) for key in upserts
    ]


def _member(
    member_id: str, metadata: dict[str, Any], current: dict[str, Any]
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member_id=member_id,
        instance_id=metadata["instance"],
        rack_id=metadata["rack"],
        client_id=str(metadata["client"]),
        client_host=str(metadata["host"]),
        rebalance_timeout_ms=int(metadata["rebalance_ms"]),
        subscribed_topic_names=tuple(str(t) for t in metadata["topics"]),
        subscribed_topic_regex=metadata["regex"],
        server_assignor=metadata["assignor"],
        member_epoch=int(current.get("epoch", 0)),
        previous_member_epoch=int(current.get("previous", 0)),
        state=MemberState(current.get("state", MemberState.STABLE.value)),
        assigned=_partition_set(current.get("assigned", ())),
        pending_revocation=_partition_set(current.get("revoking", ())),
    )


def load_consumer_group(
    group_id: str,
    records: Mapping[RecordKey, dict[str, Any]],
    config: ConsumerGroupConfig,
    now: float,
) -> ConsumerGroup:
    """The group the records describe (Kafka's replay and onLoaded): every member gets a
    session from `now`, and one revoking partitions its rebalance timeout from `now`.
    A member without its metadata record is left out; one without its assignment record
    comes back at epoch 0, to be fenced at its next heartbeat (as with Kafka)."""
    topics = records.get((PARTITION_METADATA, ""), {}).get("topics", ())
    subscribed = {str(t): int(n) for t, n in topics}
    # Until the first heartbeat brings the topics, the group knows those it assigned.
    group = ConsumerGroup(group_id, config, subscribed)
    group.subscribed_partitions = dict(subscribed)
    group.group_epoch = int(records.get((GROUP_METADATA, ""), {}).get("epoch", 0))
    group.assignment_epoch = int(records.get((TARGET_ASSIGNMENT_METADATA, ""), {}).get("epoch", 0))
    for (kind, member_id), metadata in sorted(records.items()):
        if kind != MEMBER_METADATA:
            continue
        current = records.get((CURRENT_MEMBER_ASSIGNMENT, member_id), {})
        member = _member(member_id, metadata, current)
        owned = frozenset(tp for tp in member.owned if tp not in group.owners)
        if owned != member.owned:  # a torn journal: never two owners of a partition
            member = attrs.evolve(
                member,
                assigned=member.assigned & owned,
                pending_revocation=member.pending_revocation & owned,
            )
        group.members[member_id] = member
        group.owners.update(dict.fromkeys(member.owned, member_id))
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member_id
        group.session_deadlines[member_id] = now + config.session_timeout_ms
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            group.rebalance_deadlines[member_id] = now + member.rebalance_timeout_ms
        target = records.get((TARGET_ASSIGNMENT_MEMBER, member_id))
        if target is not None:
            group.target[member_id] = _partition_set(target["partitions"])
    return group
