"""Kafka record batches straight into Arrow, in the schema of Spark's Kafka source.

The hot loop of the source: each fetched batch is decompressed once, its
records walked once by the broker's record walk (`broker/protocol/record_batch/walk.py`,
compiled when built), the walk's spans appended to plain lists, and
each column becomes one ``pa.array`` call per Arrow batch. The Arrow schema must
equal what Spark derives from the source's schema exactly (microsecond UTC
timestamps, int32 partition, the list child named ``element``), or the query
fails with DATA_SOURCE_RETURN_SCHEMA_MISMATCH.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from broker.protocol.record_batch.batch_checks import iter_batches
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import LOG_APPEND_TIME, RecordBatchHeader
from broker.protocol.record_batch.record_sinks import record_header_spans, walk_batch

SPARK_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
SPARK_SCHEMA_WITH_HEADERS = SPARK_SCHEMA + ", headers array<struct<key: string, value: binary>>"

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_HEADERS = pa.list_(pa.field("element", _HEADER_STRUCT))
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _TIMESTAMP),
    pa.field("timestampType", pa.int32()),
]
ARROW_SCHEMA = pa.schema(_BASE_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", _HEADERS)])

Headers = list[tuple[str, bytes | None]] | None


class CorruptRecordsError(Exception):
    """Fetched record data that does not decode."""


def spark_schema(include_headers: bool) -> str:
    return SPARK_SCHEMA_WITH_HEADERS if include_headers else SPARK_SCHEMA


def arrow_schema(include_headers: bool) -> pa.Schema:
    return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA


class RecordColumns:
    """Accumulates one topic-partition's records as columns; ``take()`` makes an Arrow batch."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[Headers] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_record_set(self, records: bytes | bytearray | memoryview, start: int, end: int) -> int:
        """Decode the whole batches of a fetched record set, keeping offsets in [start, end).

        Returns the offset after the last batch looked at (the next fetch offset);
        control batches are skipped, a partial batch at the tail is ignored.
        """
        decoding = self.decode(records, start, end, rows_per_batch=None)
        while True:
            try:
                next(decoding)
            except StopIteration as done:
                return int(done.value)

    def decode(
        self,
        records: bytes | bytearray | memoryview,
        start: int,
        end: int,
        rows_per_batch: int | None,
    ) -> Generator[pa.RecordBatch, None, int]:
        """``add_record_set`` that hands out an Arrow batch whenever ``rows_per_batch`` rows are in.

        A 4 MiB Fetch of small compressed records holds hundreds of thousands of
        rows: yielding them in slices lets Spark consume one while the next is
        decoded, and bounds the worker's memory. Returns the next fetch offset.
        """
        next_offset = start
        try:
            for header, batch in iter_batches(records, allow_partial_tail=True):
                if header.base_offset >= end:
                    break
                next_offset = max(next_offset, header.last_offset + 1)
                if header.last_offset < start or header.is_control or header.record_count == 0:
                    continue
                self.add_batch(header, batch, start, end)
                if rows_per_batch is not None and len(self) >= rows_per_batch:
                    yield self.take()
        except InvalidRecordsError as exc:
            raise CorruptRecordsError(
                f"{self.topic}-{self.partition} near offset {next_offset}: {exc.message}"
            ) from exc
        return next_offset

    def add_batch(
        self, header: RecordBatchHeader, batch: memoryview | bytes, start: int, end: int
    ) -> None:
        before = len(self.offsets)
        self._add_records(header, batch)
        added = len(self.offsets) - before
        self.timestamp_types.extend([header.timestamp_type] * added)
        if header.base_offset < start or header.last_offset >= end:
            self._trim(before, start, end)

    def _add_records(self, header: RecordBatchHeader, batch: memoryview | bytes) -> None:
        """The Arrow sink of the record walk: columns appended from the walk's spans.
        Raises InvalidRecordsError for records that do not decode."""
        spans: list[int] = []
        data = walk_batch(batch, header, spans)
        add_key = self.keys.append
        add_value = self.values.append
        add_offset = self.offsets.append
        add_timestamp = self.timestamps.append
        headers = self.headers if self.include_headers else None
        base_offset = header.base_offset
        base_timestamp = header.base_timestamp
        log_append = header.timestamp_type == LOG_APPEND_TIME
        it = iter(spans)
        for _, ts_delta, offset_delta, k, k_len, v, v_len, h, end in zip(
            it, it, it, it, it, it, it, it, it, strict=True
        ):
            add_key(None if k_len < 0 else data[k : k + k_len])
            add_value(None if v_len < 0 else data[v : v + v_len])
            add_offset(base_offset + offset_delta)
            add_timestamp(header.max_timestamp if log_append else base_timestamp + ts_delta)
            if headers is not None:
                headers.append(list(record_header_spans(data, h, end)) or None)

    def _trim(self, before: int, start: int, end: int) -> None:
        """Drop this batch's records outside [start, end) (offsets ascend within a batch)."""
        offsets = self.offsets
        lo = before
        while lo < len(offsets) and offsets[lo] < start:
            lo += 1
        hi = lo
        while hi < len(offsets) and offsets[hi] < end:
            hi += 1
        columns: list[list[Any]] = [
            self.keys,
            self.values,
            self.offsets,
            self.timestamps,
            self.timestamp_types,
        ]
        if self.include_headers:
            columns.append(self.headers)
        for column in columns:
            del column[hi:]
            del column[before:lo]

    def take(self) -> pa.RecordBatch:
        """The accumulated rows as one Arrow batch in Spark's schema; starts afresh."""
        n = len(self.offsets)
        timestamps = pa.array(self.timestamps, pa.int64())
        timestamps = pc.multiply(timestamps, 1000).view(_TIMESTAMP)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            timestamps,
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(
                pa.array(
                    [
                        None if h is None else [{"key": k, "value": v} for k, v in h]
                        for h in self.headers
                    ],
                    _HEADERS,
                )
            )
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(self.include_headers))


def record_set_to_arrow(
    records: bytes | bytearray | memoryview,
    topic: str,
    partition: int,
    *,
    start: int = 0,
    end: int = 1 << 62,
    include_headers: bool = False,
) -> pa.RecordBatch:
    """One record set (e.g. a Fetch answer's records) as an Arrow batch."""
    columns = RecordColumns(topic, partition, include_headers)
    columns.add_record_set(records, start, end)
    return columns.take()
