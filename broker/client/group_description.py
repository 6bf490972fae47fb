"""`groups describe`: a group's partitions as kafka-consumer-groups.sh --describe shows them.

One row per partition the group has committed or a member is assigned, with the
committed offset (from the group's coordinator), the log end offset (from each
partition's leader: the routing session sends each request where it belongs) and the
member consuming it; a member with no partitions gets a row of its own, as in Kafka.
Building the rows and laying out the table are pure functions over the answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from broker.client.fetcher import LATEST, list_offsets
from broker.client.group_member import decode_versioned
from broker.client.group_offsets import fetch_committed
from broker.client.session import ClientSession
from broker.protocol.errors import DecodeError
from broker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment

OFFSETS_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
# Kafka's narrowest columns (its format is "%-10s %-15s %-15s %-15s" for the numbers).
OFFSETS_MIN_WIDTHS = (0, 0, 10, 15, 15, 15, 0, 0, 0)


@attrs.frozen
class MemberInfo:
    consumer_id: str
    host: str
    client_id: str


@attrs.frozen
class PartitionRow:
    """A row of the table; None where Kafka prints "-"."""

    group: str
    topic: str | None
    partition: int | None
    committed: int | None
    log_end: int | None
    member: MemberInfo | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)

    def cells(self) -> tuple[str, ...]:
        member = self.member
        return (
            self.group,
            *(
                "-" if value is None else str(value)
                for value in (self.topic, self.partition, self.committed, self.log_end, self.lag)
            ),
            member.consumer_id if member else "-",
            member.host if member else "-",
            member.client_id if member else "-",
        )

    def to_json(self) -> dict[str, Any]:
        member = self.member
        return {
            "topic": self.topic,
            "partition": self.partition,
            "committed_offset": self.committed,
            "log_end_offset": self.log_end,
            "lag": self.lag,
            "consumer_id": member.consumer_id if member else None,
            "host": member.host if member else None,
            "client_id": member.client_id if member else None,
        }


def assigned_partitions(group: Any, member: Any) -> list[tuple[str, int]]:
    """A member's partitions: a KIP-848 member's from its described assignment, a classic
    consumer's from its assignment bytes; none for another protocol's member or bytes that
    do not decode (a member's bytes are its client's business)."""
    assignment = getattr(member, "assignment", None)
    if assignment is not None:
        return [
            (tp.topic_name, partition)
            for tp in assignment.topic_partitions
            for partition in tp.partitions
        ]
    if getattr(group, "protocol_type", None) != "consumer":
        return []
    try:
        decoded = decode_versioned(ConsumerProtocolAssignment, member.member_assignment)
    except DecodeError:
        return []
    return [
        (topic.topic, partition)
        for topic in getattr(decoded, "assigned_partitions", ())
        for partition in topic.partitions
    ]


def partition_rows(
    group: Any, committed: Mapping[tuple[str, int], int], log_ends: Mapping[tuple[str, int], int]
) -> list[PartitionRow]:
    """The table's rows for a described group: assigned partitions by member, then
    partitions committed but unassigned, then members without partitions."""
    rows: list[PartitionRow] = []
    assigned: set[tuple[str, int]] = set()
    idle: list[MemberInfo] = []
    for m in group.members:
        member = MemberInfo(m.member_id, m.client_host, m.client_id)
        partitions = sorted(assigned_partitions(group, m))
        if not partitions:
            idle.append(member)
        for key in partitions:
            assigned.add(key)
            rows.append(_row(group.group_id, key, committed, log_ends, member))
    for key in sorted(set(committed) - assigned):
        rows.append(_row(group.group_id, key, committed, log_ends, None))
    rows.extend(PartitionRow(group.group_id, None, None, None, None, m) for m in idle)
    return rows


def _row(
    group_id: str,
    key: tuple[str, int],
    committed: Mapping[tuple[str, int], int],
    log_ends: Mapping[tuple[str, int], int],
    member: MemberInfo | None,
) -> PartitionRow:
    offset = committed.get(key, -1)
    return PartitionRow(
        group_id, key[0], key[1], offset if offset >= 0 else None, log_ends.get(key), member
    )


def table(
    header: Sequence[str], rows: Iterable[Sequence[str]], min_widths: Sequence[int] = ()
) -> list[str]:
    """Columns as wide as their widest cell (or `min_widths`), one space apart."""
    lines = [tuple(header), *(tuple(r) for r in rows)]
    least = [*min_widths, *[0] * (len(header) - len(min_widths))]
    widths = [max(least[i], *(len(line[i]) for line in lines)) for i in range(len(header))]
    return [
        " ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]


async def describe_partitions(session: ClientSession, group: Any) -> list[PartitionRow]:
    """The rows for a described group: its committed offsets and the log end offsets."""
    committed = {
        k: v for k, v in (await fetch_committed(session, group.group_id)).items() if v >= 0
    }
    wanted = set(committed)
    for m in group.members:
        wanted.update(assigned_partitions(group, m))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(wanted):
        by_topic.setdefault(topic, []).append(partition)
    log_ends: dict[tuple[str, int], int] = {}
    for topic, partitions in by_topic.items():
        ends = await list_offsets(session, topic, partitions, LATEST)
        log_ends.update(((topic, p), offset) for p, offset in ends.items())
    return partition_rows(group, committed, log_ends)
