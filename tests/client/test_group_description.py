"""`groups describe`'s rows from a DescribeGroups answer, without a broker."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from broker.client.group_description import (
    OFFSETS_HEADER,
    OFFSETS_MIN_WIDTHS,
    assigned_partitions,
    partition_rows,
    table,
)
from broker.client.group_member import encode_versioned
from broker.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from broker.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
)


def member(member_id: str, assignment: bytes) -> DescribedGroupMember:
    return DescribedGroupMember(
        member_id=member_id,
        client_id="app",
        client_host="/127.0.0.1",
        member_assignment=assignment,
    )


def assignment(*partitions: int) -> bytes:
    return encode_versioned(
        ConsumerProtocolAssignment(
            assigned_partitions=(TopicPartition(topic="t", partitions=partitions),)
        )
    )


def test_rows_follow_kafka_consumer_groups_assigned_then_committed_then_idle_members() -> None:
    group = DescribedGroup(
        group_id="g",
        group_state="Stable",
        protocol_type="consumer",
        protocol_data="range",
        members=(member("m-1", assignment(1, 0)), member("m-2", b"")),
    )
    committed = {("t", 0): 7, ("t", 2): 3}
    log_ends = {("t", 0): 10, ("t", 1): 4, ("t", 2): 3}
    rows = [row.cells() for row in partition_rows(group, committed, log_ends)]
    assert rows == [
        ("g", "t", "0", "7", "10", "3", "m-1", "/127.0.0.1", "app"),
        ("g", "t", "1", "-", "4", "-", "m-1", "/127.0.0.1", "app"),
        ("g", "t", "2", "3", "3", "0", "-", "-", "-"),
        ("g", "-", "-", "-", "-", "-", "m-2", "/127.0.0.1", "app"),
    ]
    lines = table(OFFSETS_HEADER, rows, OFFSETS_MIN_WIDTHS)
    assert lines[0].startswith("GROUP TOPIC PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG")
    assert {line.index("m-1") for line in lines[1:3]} == {lines[0].index("CONSUMER-ID")}


@given(st.binary(max_size=64))
def test_any_assignment_bytes_are_read_without_failing_and_other_protocols_are_not(
    data: bytes,
) -> None:
    member = SimpleNamespace(member_assignment=data)
    partitions = assigned_partitions(SimpleNamespace(protocol_type="consumer"), member)
    assert all(isinstance(p, int) for _, p in partitions)
    other = SimpleNamespace(member_assignment=assignment(0))
    assert assigned_partitions(SimpleNamespace(protocol_type="connect"), other) == []


def test_a_kip848_members_partitions_come_from_its_described_assignment() -> None:
    described = SimpleNamespace(
        topic_partitions=(SimpleNamespace(topic_name="t", partitions=(2, 0)),)
    )
    member = SimpleNamespace(assignment=described)
    assert assigned_partitions(SimpleNamespace(), member) == [("t", 2), ("t", 0)]
