"""`groups describe` for KIP-848 consumer groups: ConsumerGroupDescribe, as Kafka's admin
client asks it first and falls back to DescribeGroups for classic groups (which
answers a consumer group as Dead)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from broker.client.session import ClientSession, check_error
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ConsumerGroupDescribeRequest


async def describe_consumer_groups(session: ClientSession, names: Sequence[str]) -> dict[str, Any]:
    """The named groups that are consumer groups, by name (one request per group, so a
    cluster routes each to its coordinator)."""
    if ApiKey.CONSUMER_GROUP_DESCRIBE not in session.broker_versions:
        return {}
    found: dict[str, Any] = {}
    for name in names:
        response = await session.call(ConsumerGroupDescribeRequest(group_ids=(name,)))
        (group,) = response.groups
        if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            continue
        check_error(group.error_code, f"group {name!r}")
        found[name] = group
    return found


def _partitions(assignment: Any) -> str:
    parts = [
        f"{tp.topic_name}:{','.join(map(str, tp.partitions))}" for tp in assignment.topic_partitions
    ]
    return " ".join(parts) or "-"


def consumer_group_lines(group: Any) -> Iterable[str]:
    yield (
        f"group {group.group_id}: type consumer, state {group.group_state}, "
        f"group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}, "
        f"assignor {group.assignor_name}, {len(group.members)} members"
    )
    for m in group.members:
        subscription = ",".join(m.subscribed_topic_names) or "-"
        if m.subscribed_topic_regex:
            subscription += f" regex {m.subscribed_topic_regex}"
        yield (
            f"  member {m.member_id} epoch {m.member_epoch} client {m.client_id} "
            f"host {m.client_host} instance {m.instance_id or '-'} subscribed {subscription}"
        )
        yield (
            f"    assigned {_partitions(m.assignment)} target {_partitions(m.target_assignment)}"
        )
