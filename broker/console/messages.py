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
from broker.console.transaction_states import Marker, TransactionStates
from broker.protocol.api import ApiKey
from broker.protocol.messages import ProduceRequest
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.protocol.record_batch.control import CONTROL_COMMIT as COMMIT
from broker.protocol.record_batch.control import control_type
from broker.protocol.records import (
    DecodedRecord,
    InvalidRecordsError,
    Record,
    RecordBatchHeader,
    encode_batch,
    iter_batches,
    iter_records,
)

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


@attrs.frozen
class ReadRecord:
    """A record with the producer of its transaction (None: not in a transaction)."""

    record: DecodedRecord
    producer_id: int | None


def _as_json(read: ReadRecord, transaction: dict[str, Any] | None) -> dict[str, Any]:
    record = read.record
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": shown(record.key),
        "value": shown(record.value),
        "headers": [{"key": k, "value": shown(v)} for k, v in record.headers],
        "transaction": transaction,
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
    reader = _Reader(Fetcher(session, info), p, query.contains.encode())
    if query.newest_first and query.offset is None and query.timestamp_ms is None:
        records = await reader.backward(start, end, query.limit)
    else:
        records = await reader.forward(first, end, query.limit, reader.needle)
        if query.newest_first:
            records.reverse()
    transactions = await reader.transactions(records)
    return {
        "topic": query.topic,
        "partition": p,
        "start_offset": start,
        "end_offset": end,
        "last_stable_offset": reader.states.last_stable_offset,
        "records": [_as_json(r, transactions.get(r.record.offset)) for r in records],
    }


class _Reader:
    """Reads of one partition with READ_UNCOMMITTED (open and aborted records too),
    keeping the transaction markers and the last stable offset they saw."""

    def __init__(self, fetcher: Fetcher, partition: int, needle: bytes) -> None:
        self.fetcher = fetcher
        self.partition = partition
        self.needle = needle
        self.states = TransactionStates()

    async def forward(self, first: int, end: int, limit: int, needle: bytes) -> list[ReadRecord]:
        offset = first
        out: list[ReadRecord] = []
        scanned = 0
        while offset < end and len(out) < limit and scanned < MAX_SCANNED:
            (data,) = await self.fetcher.fetch_partitions(
                [Cursor(self.partition, offset)], _FETCH_WAIT_MS
            )
            self.states.saw_last_stable_offset(data.last_stable_offset)
            before = offset
            for header, records in self._decoded(data.records, offset):
                for record in records:
                    scanned += 1
                    if record.offset < end and _matches(record, needle) and len(out) < limit:
                        producer = header.producer_id if header.is_transactional else None
                        out.append(ReadRecord(record, producer))
                offset = header.last_offset + 1
            if offset == before:
                break  # nothing more readable (a gap at the end of a compacted log)
        return out

    def _decoded(
        self, data: bytes | memoryview | None, offset: int
    ) -> list[tuple[RecordBatchHeader, list[DecodedRecord]]]:
        """Each batch from `offset` on with its records from `offset` on; a control
        batch's marker is kept (its records are not shown)."""
        out: list[tuple[RecordBatchHeader, list[DecodedRecord]]] = []
        for header, batch in _batches(data, offset):
            try:
                if header.is_control:
                    kind = control_type(batch, header)
                    if kind is not None:
                        marker = Marker(header.base_offset, header.producer_id, kind == COMMIT)
                        self.states.saw_marker(marker)
                    out.append((header, []))
                else:
                    records = [r for r in iter_records(batch, header) if r.offset >= offset]
                    out.append((header, records))
            except InvalidRecordsError as exc:
                raise _corrupt(header.base_offset, exc) from None
        return out

    async def backward(self, start: int, end: int, limit: int) -> list[ReadRecord]:
        """Newest first: windows read from the end toward the start."""
        out: list[ReadRecord] = []
        upper = end
        window = limit
        scanned = 0
        while upper > start and len(out) < limit and scanned < MAX_SCANNED:
            lower = max(start, upper - window)
            chunk = await self.forward(lower, upper, MAX_SCANNED, b"")
            scanned += len(chunk)
            out.extend(r for r in reversed(chunk) if _matches(r.record, self.needle))
            upper = lower
            window = min(window * 4, MAX_SCANNED)
        return out[:limit]

    async def transactions(self, records: list[ReadRecord]) -> dict[int, dict[str, Any]]:
        """Per offset of a transactional record: its producer id and state."""
        states: dict[int, str] = {}
        undecided: list[ReadRecord] = []
        for r in records:
            if r.producer_id is not None:
                state = self.states.state(r.record.offset, r.producer_id)
                if state is None:
                    undecided.append(r)
                else:
                    states[r.record.offset] = state
        undecided.sort(key=lambda r: r.record.offset)
        while undecided:
            # A READ_COMMITTED Fetch from the first undecided record answers the aborted
            # transactions overlapping the batches it returns (all below the LSO).
            first = undecided[0].record.offset
            (data,) = await self.fetcher.fetch_partitions(
                [Cursor(self.partition, first)], _FETCH_WAIT_MS, read_committed=True
            )
            covered = max((h.last_offset for h, _ in _batches(data.records, first)), default=-1)
            if covered < first:
                break  # nothing below the LSO any more: shown without a state
            aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
            while undecided and undecided[0].record.offset <= covered:
                r = undecided.pop(0)
                assert r.producer_id is not None
                states[r.record.offset] = self.states.decide(
                    r.record.offset, r.producer_id, aborted
                )
        return {
            r.record.offset: {"producer_id": r.producer_id, "state": states.get(r.record.offset)}
            for r in records
            if r.producer_id is not None
        }


def _batches(
    records: bytes | memoryview | None, offset: int
) -> list[tuple[RecordBatchHeader, memoryview]]:
    """The whole batches of a Fetch answer that hold offsets from `offset` on."""
    try:
        return [
            (header, batch)
            for header, batch in iter_batches(records or b"", allow_partial_tail=True)
            if header.last_offset >= offset
        ]
    except InvalidRecordsError as exc:
        raise _corrupt(offset, exc) from None


def _corrupt(offset: int, exc: InvalidRecordsError) -> ClientError:
    return ClientError(f"corrupt records at offset {offset}: {exc.message}")


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
