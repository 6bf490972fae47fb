"""Fetching one topic's partitions from given offsets (ListOffsets, Fetch)."""

from __future__ import annotations

import attrs

from broker.client.corrupt_range import CorruptRangeError, next_readable_offset
from broker.client.session import ClientError, ClientSession, check_error
from broker.client.topics import TopicInfo
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FetchRequest, FetchResponse, ListOffsetsRequest
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.fetch_response import PartitionData
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from broker.protocol.records import DecodedRecord, InvalidRecordsError, iter_batches, iter_records

EARLIEST = -2
LATEST = -1
_TOPIC_IDS_FROM = 13
_PARTITION_MAX_BYTES = 1 << 20


@attrs.define
class Cursor:
    """Where a partition is read from next, and the last known end of its log."""

    partition: int
    offset: int
    high_watermark: int = -1

    @property
    def at_end(self) -> bool:
        return self.high_watermark >= 0 and self.offset >= self.high_watermark


async def list_offsets(
    session: ClientSession, topic: str, partitions: list[int], timestamp: int
) -> dict[int, int]:
    """Offsets for a timestamp (EARLIEST, LATEST or a time in ms) per partition."""
    body = ListOffsetsRequest(
        replica_id=-1,
        topics=(
            ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions
                ),
            ),
        ),
    )
    version = session.version_for(ApiKey.LIST_OFFSETS, minimum=1)
    response = await session.request(body, version)
    offsets: dict[int, int] = {}
    for t in response.topics:
        for p in t.partitions:
            check_error(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
            offsets[p.partition_index] = p.offset
    return offsets


class Fetcher:
    """Fetch requests for one topic at the highest common version."""

    def __init__(self, session: ClientSession, info: TopicInfo) -> None:
        self.session = session
        self.info = info
        # Without a topic id (Metadata before v10) only name-based Fetch works.
        maximum = None if info.topic_id.int else _TOPIC_IDS_FROM - 1
        self.version = session.version_for(ApiKey.FETCH, minimum=4, maximum=maximum)

    async def fetch(
        self, cursors: list[Cursor], max_wait_ms: int
    ) -> list[tuple[int, DecodedRecord]]:
        """Records after each cursor (advancing it), in partition order."""
        by_partition = {c.partition: c for c in cursors}
        out: list[tuple[int, DecodedRecord]] = []
        for p in await self.fetch_partitions(cursors, max_wait_ms):
            cursor = by_partition.get(p.partition_index)
            if cursor is None:
                continue
            cursor.high_watermark = p.high_watermark
            out.extend((p.partition_index, r) for r in _records_from(cursor, p.records))
        return out

    async def fetch_partitions(
        self, cursors: list[Cursor], max_wait_ms: int, *, read_committed: bool = False
    ) -> list[PartitionData]:
        """The Fetch answer's partitions as sent (whole batches, control batches included,
        the last stable offset; the aborted transactions only when `read_committed`),
        each checked for its error; cursors are not moved."""
        response = await self._request(
            cursors, max_wait_ms, _PARTITION_MAX_BYTES, read_committed=read_committed
        )
        offsets = {c.partition: c.offset for c in cursors}
        out: list[PartitionData] = []
        for t in response.responses:
            for p in t.partitions:
                offset = offsets.get(p.partition_index)
                if offset is None:
                    continue
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise await self._out_of_range(offset, p.partition_index)
                if p.error_code == ErrorCode.CORRUPT_MESSAGE:
                    raise await self._corrupt(offset, p.partition_index)
                check_error(p.error_code, f"Fetch {self.info.name}-{p.partition_index}")
                out.append(p)
        return out

    async def _request(
        self,
        cursors: list[Cursor],
        max_wait_ms: int,
        partition_max_bytes: int,
        *,
        read_committed: bool = False,
    ) -> FetchResponse:
        topic = FetchTopic(
            topic=self.info.name,
            topic_id=self.info.topic_id,
            partitions=tuple(
                FetchPartition(
                    partition=c.partition,
                    fetch_offset=c.offset,
                    partition_max_bytes=partition_max_bytes,
                )
                for c in cursors
            ),
        )
        body = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=50 << 20,
            isolation_level=1 if read_committed else 0,
            session_id=0,
            session_epoch=-1,
            topics=(topic,),
        )
        response: FetchResponse = await self.session.request(
            body, self.version, max_wait_ms / 1000 + 30
        )
        check_error(response.error_code, "Fetch failed")
        return response

    async def _corrupt(self, offset: int, partition: int) -> CorruptRangeError:
        """The error with the offsets lost, probed (broker/client/corrupt_range.py)."""

        async def readable(probe: int) -> bool:
            response = await self._request([Cursor(partition, probe)], 0, 1)
            codes = [p.error_code for t in response.responses for p in t.partitions]
            return ErrorCode.CORRUPT_MESSAGE not in codes

        end = await list_offsets(self.session, self.info.name, [partition], LATEST)
        next_offset = await next_readable_offset(readable, offset, end[partition])
        return CorruptRangeError(self.info.name, partition, offset, next_offset)

    async def _out_of_range(self, offset: int, partition: int) -> ClientError:
        """The error with the log's real range: an error answer carries no high watermark."""
        start = await list_offsets(self.session, self.info.name, [partition], EARLIEST)
        end = await list_offsets(self.session, self.info.name, [partition], LATEST)
        return ClientError(
            f"offset {offset} is out of range for {self.info.name}-{partition} "
            f"(the log holds offsets {start[partition]} to {end[partition]}, exclusive)"
        )


def _records_from(cursor: Cursor, records: bytes | memoryview | None) -> list[DecodedRecord]:
    out: list[DecodedRecord] = []
    if not records:
        return out
    try:
        for header, batch in iter_batches(records, allow_partial_tail=True):
            if header.last_offset < cursor.offset:
                continue
            if not header.is_control:
                out.extend(r for r in iter_records(batch, header) if r.offset >= cursor.offset)
            cursor.offset = header.last_offset + 1
    except InvalidRecordsError as exc:
        raise ClientError(f"corrupt records at offset {cursor.offset}: {exc.message}") from None
    return out
