"""Browsing one partition's records and producing a test record, for the console.

A browse reads a bounded window: from an offset (or the first offset at a
timestamp) forward, or backward from the end (newest first), keeping the records
whose key or value contains the filter, up to `limit` records and at most
`MAX_SCANNED` records read. Values are shown as the page needs them: JSON
pretty-printed, other UTF-8 text as is, anything else as hex.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from broker.client.fetcher import EARLIEST, LATEST, Cursor, Fetcher, list_offsets
from broker.client.session import ClientError, check_error
from broker.client.topics import describe_topic
from broker.console.console_session import ConsoleSession
from broker.protocol.api import ApiKey
from broker.protocol.messages import ProduceRequest
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.protocol.records import DecodedRecord, Record, encode_batch

MAX_LIMIT = 500
MAX_SCANNED = 20_000
_FETCH_WAIT_MS = 0


@attrs.frozen
class BrowseQuery:
    topic: str
    partition: int
    offset: int | None = None
    timestamp_ms: int | None = None
    newest_first: bool = True
    limit: int = 50
    contains: str = ""


def parse_query(topic: str, params: dict[str, str]) -> BrowseQuery:
    """The query string of a browse, or ClientError saying which parameter is wrong."""

    def number(name: str, default: int | None) -> int | None:
        raw = params.get(name, "").strip()
        if not raw:
            return default
        try:
            return int(raw)
        except ValueError:
            raise ClientError(f"{name} must be a whole number, not {raw!r}") from None

    partition = number("partition", 0)
    limit = number("limit", 50)
    assert partition is not None and limit is not None
    if partition < 0:
        raise ClientError("partition must be 0 or more")
    if not 1 <= limit <= MAX_LIMIT:
        raise ClientError(f"limit must be between 1 and {MAX_LIMIT}")
    order = params.get("order", "newest")
    if order not in ("newest", "oldest"):
        raise ClientError("order must be newest or oldest")
    offset = number("offset", None)
    if offset is not None and offset < 0:
        raise ClientError("offset must be 0 or more")
    return BrowseQuery(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp_ms=number("timestamp", None),
        newest_first=order == "newest",
        limit=limit,
        contains=params.get("contains", ""),
    )


def shown(data: bytes | None) -> dict[str, Any] | None:
    """How the page shows a key, value or header value."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"format": "hex", "text": data.hex(" "), "size": len(data)}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"format": "text", "text": text, "size": len(data)}
    if isinstance(parsed, dict | list):
        return {"format": "json", "text": json.dumps(parsed, indent=2), "size": len(data)}
    return {"format": "text", "text": text, "size": len(data)}


def _matches(record: DecodedRecord, needle: bytes) -> bool:
    return not needle or any(needle in (part or b"") for part in (record.key, record.value))


def _as_json(record: DecodedRecord) -> dict[str, Any]:
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": shown(record.key),
        "value": shown(record.value),
        "headers": [{"key": k, "value": shown(v)} for k, v in record.headers],
    }


async def browse(session: ConsoleSession, query: BrowseQuery) -> dict[str, Any]:
    info = await describe_topic(session, query.topic)
    if query.partition not in info.partitions:
        raise ClientError(f"topic {query.topic!r} has no partition {query.partition}")
    p = query.partition
    start = (await list_offsets(session, query.topic, [p], EARLIEST))[p]
    end = (await list_offsets(session, query.topic, [p], LATEST))[p]
    if query.timestamp_ms is not None:
        found = (await list_offsets(session, query.topic, [p], query.timestamp_ms))[p]
        first = end if found < 0 else found
    elif query.offset is not None:
        if query.offset > end:
            raise ClientError(
                f"offset {query.offset} is beyond the end of {query.topic}-{p} "
                f"(the log holds offsets {start} to {end}, exclusive)"
            )
        first = max(query.offset, start)
    else:
        first = start
    needle = query.contains.encode()
    fetcher = Fetcher(session, info)
    if query.newest_first and query.offset is None and query.timestamp_ms is None:
        records = await _backward(fetcher, p, start, end, query.limit, needle)
    else:
        records = await _forward(fetcher, p, first, end, query.limit, needle)
        if query.newest_first:
            records.reverse()
    return {
        "topic": query.topic,
        "partition": p,
        "start_offset": start,
        "end_offset": end,
        "records": [_as_json(r) for r in records],
    }


async def _forward(
    fetcher: Fetcher, partition: int, first: int, end: int, limit: int, needle: bytes
) -> list[DecodedRecord]:
    cursor = Cursor(partition, first)
    out: list[DecodedRecord] = []
    scanned = 0
    while cursor.offset < end and len(out) < limit and scanned < MAX_SCANNED:
        before = cursor.offset
        for _, record in await fetcher.fetch([cursor], _FETCH_WAIT_MS):
            scanned += 1
            if record.offset < end and _matches(record, needle) and len(out) < limit:
                out.append(record)
        if cursor.offset == before:
            break  # nothing more readable (a gap at the end of a compacted log)
    return out


async def _backward(
    fetcher: Fetcher, partition: int, start: int, end: int, limit: int, needle: bytes
) -> list[DecodedRecord]:
    """Newest first: windows read from the end toward the start."""
    out: list[DecodedRecord] = []
    upper = end
    window = limit
    scanned = 0
    while upper > start and len(out) < limit and scanned < MAX_SCANNED:
        lower = max(start, upper - window)
        chunk = await _forward(fetcher, partition, lower, upper, MAX_SCANNED, b"")
        scanned += len(chunk)
        out.extend(r for r in reversed(chunk) if _matches(r, needle))
        upper = lower
        window = min(window * 4, MAX_SCANNED)
    return out[:limit]


async def produce_one(
    session: ConsoleSession,
    topic: str,
    partition: int,
    key: str | None,
    value: str,
    headers: list[tuple[str, str]],
) -> int:
    """Write one record (acks=all); its offset."""
    info = await describe_topic(session, topic)
    if partition not in info.partitions:
        raise ClientError(f"topic {topic!r} has no partition {partition}")
    record = Record(
        0,
        0,
        None if key is None else key.encode(),
        value.encode(),
        tuple((k, v.encode()) for k, v in headers),
    )
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(
                    PartitionProduceData(index=partition, records=encode_batch([record])),
                ),
            ),
        ),
    )
    response = await session.request(body, session.version_for(ApiKey.PRODUCE, minimum=3))
    for t in response.responses:
        for p in t.partition_responses:
            check_error(p.error_code, f"produce to {t.name}-{p.index}", p.error_message)
            return int(p.base_offset)
    raise ClientError(f"produce to {topic}-{partition}: no answer for the partition")
