"""A group's committed offsets (OffsetFetch), as `groups describe` and the consumer read them."""

from __future__ import annotations

from broker.client.session import ClientSession, check_error
from broker.protocol.api import ApiKey
from broker.protocol.messages import OffsetFetchRequest
from broker.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)


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
