"""A group's committed offsets against the log end: what kafka-consumer-groups.sh shows."""

from __future__ import annotations

import attrs

from broker.client.fetcher import LATEST, list_offsets
from broker.client.session import ClientSession, check_error
from broker.protocol.api import ApiKey
from broker.protocol.messages import OffsetFetchRequest
from broker.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)


@attrs.frozen
class PartitionLag:
    topic: str
    partition: int
    committed: int
    log_end: int

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)


async def fetch_committed(
    session: ClientSession, group_id: str, only: tuple[str, tuple[int, ...]] | None = None
) -> dict[tuple[str, int], int]:
    """The group's committed offsets (-1 where none): of `only` (topic, partitions), or of
    every topic (OffsetFetch with null topics, v2+). One request at the highest version."""
    version = session.version_for(ApiKey.OFFSET_FETCH, minimum=1 if only else 2)
    if version >= 8:
        topics_v8 = None
        if only is not None:
            topics_v8 = (OffsetFetchRequestTopics(name=only[0], partition_indexes=only[1]),)
        group = OffsetFetchRequestGroup(
            group_id=group_id, member_id=None, member_epoch=-1, topics=topics_v8
        )
        body = OffsetFetchRequest(groups=(group,))
    else:
        topics_v0 = None
        if only is not None:
            topics_v0 = (OffsetFetchRequestTopic(name=only[0], partition_indexes=only[1]),)
        body = OffsetFetchRequest(group_id=group_id, topics=topics_v0)
    response = await session.request(body, version)
    topics = []
    if version >= 8:
        for group in response.groups:
            check_error(group.error_code, f"OffsetFetch {group_id!r}")
            topics.extend(group.topics)
    else:
        if version >= 2:
            check_error(response.error_code, f"OffsetFetch {group_id!r}")
        topics.extend(response.topics)
    offsets: dict[tuple[str, int], int] = {}
    for t in topics:
        for p in t.partitions:
            check_error(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
            offsets[(t.name, p.partition_index)] = p.committed_offset
    return offsets


async def group_lag(session: ClientSession, group_id: str) -> list[PartitionLag]:
    """Committed offset, log end offset and lag per partition the group has committed."""
    committed = {k: v for k, v in (await fetch_committed(session, group_id)).items() if v >= 0}
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
