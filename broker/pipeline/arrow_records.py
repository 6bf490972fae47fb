"""Kafka record batches straight into Arrow, in the schema of Spark's Kafka source.

The hot loop of the source: each fetched batch is decompressed once, its
records' varints are parsed in one flat loop that appends to plain lists, and
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

from broker.protocol.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    CompressionError,
    CompressionType,
    decompress,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    InvalidRecordsError,
    RecordBatchHeader,
    iter_batches,
)

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
        payload = _payload(header, batch)
        before = len(self.offsets)
        log_append = header.timestamp_type == LOG_APPEND_TIME
        _decode_into(
            payload,
            header.record_count,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp if log_append else None,
            self.keys,
            self.values,
            self.offsets,
            self.timestamps,
            self.headers if self.include_headers else None,
        )
        added = len(self.offsets) - before
        self.timestamp_types.extend([header.timestamp_type] * added)
        if header.base_offset < start or header.last_offset >= end:
            self._trim(before, start, end)

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


def _payload(header: RecordBatchHeader, batch: memoryview | bytes) -> bytes:
    view = memoryview(batch)[BATCH_HEADER_SIZE : header.size_in_bytes]
    codec = header.attributes & 0x07
    if codec == CompressionType.NONE:
        return view.tobytes()
    try:
        return decompress(CompressionType(codec), view, DEFAULT_MAX_DECOMPRESSED_SIZE)
    except (CompressionError, ValueError) as exc:
        raise InvalidRecordsError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of any length (the loop inlines the one- and two-byte cases)."""
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


def _decode_into(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    keys: list[bytes | None],
    values: list[bytes | None],
    offsets: list[int],
    timestamps: list[int],
    headers: list[Headers] | None,
) -> None:
    """The record loop, flat: one- and two-byte varints are decoded inline."""
    add_key = keys.append
    add_value = values.append
    add_offset = offsets.append
    add_timestamp = timestamps.append
    varint = _varint
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                length = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                length, pos = varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecordsError(f"invalid record length {length}")
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = varint(data, pos)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                offset_delta, pos = varint(data, pos)
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                size = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                size, pos = varint(data, pos)
            if size >= 0:
                add_key(data[pos : pos + size])
                pos += size
            else:
                add_key(None)
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                size = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                size, pos = varint(data, pos)
            if size >= 0:
                add_value(data[pos : pos + size])
                pos += size
            else:
                add_value(None)
            if pos >= record_end:
                raise CorruptRecordsError("record fields run past the record's length")
            if headers is not None:
                headers.append(_headers(data, pos, record_end))
            pos = record_end
            add_offset(base_offset + offset_delta)
            add_timestamp(base_timestamp + ts_delta if log_append_time is None else log_append_time)
    except IndexError as exc:
        raise CorruptRecordsError("record data ends before the declared record count") from exc
    if pos != end:
        raise CorruptRecordsError(f"{end - pos} bytes remain after {count} records")


def _headers(data: bytes, pos: int, end: int) -> Headers:
    count, pos = _varint(data, pos)
    if count == 0:
        return None
    result: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        size, pos = _varint(data, pos)
        if size < 0 or pos + size > end:
            raise CorruptRecordsError("invalid header key")
        key = data[pos : pos + size].decode("utf-8", "replace")
        pos += size
        size, pos = _varint(data, pos)
        if size >= 0:
            if pos + size > end:
                raise CorruptRecordsError("invalid header value")
            result.append((key, data[pos : pos + size]))
            pos += size
        else:
            result.append((key, None))
    return result
