"""A group's committed offsets against the log end: what kafka-consumer-groups.sh shows."""

from __future__ import annotations

import attrs

from broker.client.fetcher import LATEST, list_offsets
from broker.client.session import ClientSession, check_error
from broker.protocol.messages import OffsetFetchRequest
from broker.protocol.messages.offset_fetch_request import OffsetFetchRequestGroup

OFFSET_FETCH_KEY = 9


@attrs.frozen
class PartitionLag:
    topic: str
    partition: int
    committed: int
    log_end: int

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)


async def committed_offsets(session: ClientSession, group_id: str) -> dict[tuple[str, int], int]:
    """Every committed offset of the group (OffsetFetch with all topics)."""
    version = session.version_for(OFFSET_FETCH_KEY, minimum=2)
    if version >= 8:
        body = OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(
                    group_id=group_id, member_id=None, member_epoch=-1, topics=None
                ),
            )
        )
    else:
        body = OffsetFetchRequest(group_id=group_id, topics=None)
    response = await session.request(body, version)
    topics = []
    if version >= 8:
        for group in response.groups:
            check_error(group.error_code, f"OffsetFetch {group_id!r}")
            topics.extend(group.topics)
    else:
        check_error(response.error_code, f"OffsetFetch {group_id!r}")
        topics.extend(response.topics)
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


async def group_lag(session: ClientSession, group_id: str) -> list[PartitionLag]:
    """Committed offset, log end offset and lag per partition the group has committed."""
    committed = await committed_offsets(session, group_id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in committed:
        by_topic.setdefault(topic, []).append(partition)
    rows: list[PartitionLag] = []
    for topic, partitions in sorted(by_topic.items()):
        ends = await list_offsets(session, topic, sorted(partitions), LATEST)
        rows.extend(
            PartitionLag(topic, p, committed[(topic, p)], ends[p]) for p in sorted(partitions)
        )
    return rows
