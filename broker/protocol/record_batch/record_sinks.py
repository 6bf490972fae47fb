"""Records out of a batch: the walk (``walk.py``) and the sinks that build from its spans.

Produce needs only the walk's verdict (``validate_records``: no sink, nothing built);
clients and tests need records (``decode_records``); the cleaner needs keys
(``record_keys``); the pipeline builds Arrow columns from the same spans
(``broker/pipeline/arrow_records.py``). All of them accept and refuse exactly the same
bytes, with the same codes, because one walk reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import attrs

from broker.protocol import native
from broker.protocol.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    CompressionError,
    CompressionType,
    DecompressionLimitError,
    decompress,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch import walk
from broker.protocol.record_batch.batch_checks import read_batch_header
from broker.protocol.record_batch.errors import (
    RECORD_DECODE_ERROR,
    InvalidRecordsError,
    corrupt,
)
from broker.protocol.record_batch.layout import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    LOG_APPEND_TIME,
    MIN_RECORD_SIZE,
    Buffer,
    RecordBatchHeader,
)

# The walk: the mypyc build when one matches the source.
WALKER = native.load_native(walk)
WALKER_BUILD = "native" if native.is_native(WALKER) else "pure"
_walk_records = WALKER.walk_records
_WalkError: type[Exception] = WALKER.RecordWalkError
_read_headers = WALKER.read_headers
SPAN_FIELDS = walk.SPAN_FIELDS

Headers = tuple[tuple[str, bytes | None], ...]


@attrs.frozen(slots=True)
class Record:
    """One record as stored inside a batch, with offset and time relative to it."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    attributes: int = 0


@attrs.frozen(slots=True)
class DecodedRecord:
    """A record with absolute offset and timestamp, as a consumer sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def records_payload(
    batch: Buffer,
    header: RecordBatchHeader,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """The records section as bytes, decompressed (indexing bytes is the fastest scan).

    Passing ``max_decompressed_size`` is MESSAGE_TOO_LARGE (Java producers answer that
    code by splitting the batch); data the codec rejects is CORRUPT_MESSAGE.
    """
    view = memoryview(batch)[BATCH_HEADER_SIZE : header.size_in_bytes]
    codec = header.attributes & COMPRESSION_MASK
    if codec == CompressionType.NONE:
        return view.tobytes()
    if codec > CompressionType.ZSTD:
        raise InvalidRecordsError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression type id {codec}"
        )
    try:
        return decompress(CompressionType(codec), view, max_decompressed_size)
    except DecompressionLimitError as exc:
        raise InvalidRecordsError(ErrorCode.MESSAGE_TOO_LARGE, str(exc)) from exc
    except CompressionError as exc:
        raise corrupt(str(exc)) from exc


def walk_payload(
    data: bytes, count: int, spans: list[int] | None, walker: ModuleType | None = None
) -> None:
    """Walk ``count`` records of a (decompressed) records section, filling ``spans``.

    ``walker`` is the build of ``walk`` to use (tests run each); by default the broker's.
    Anything malformed (bad varint, lengths past the end, a count that does not match
    the data) raises InvalidRecordsError, never IndexError.
    """
    if count * MIN_RECORD_SIZE > len(data):
        raise InvalidRecordsError(
            RECORD_DECODE_ERROR,
            f"batch declares {count} records but holds only {len(data)} bytes of records",
        )
    walk_fn, walk_error = (
        (_walk_records, _WalkError)
        if walker is None
        else (walker.walk_records, walker.RecordWalkError)
    )
    try:
        pos = walk_fn(data, count, spans)
    except IndexError:
        raise InvalidRecordsError(RECORD_DECODE_ERROR, walk.TRUNCATED) from None
    except walk_error as exc:
        raise InvalidRecordsError(RECORD_DECODE_ERROR, str(exc)) from None
    if pos != len(data):
        raise InvalidRecordsError(
            RECORD_DECODE_ERROR,
            f"incorrect declared batch size: {len(data) - pos} bytes remain after {count} records",
        )


def walk_batch(
    batch: Buffer,
    header: RecordBatchHeader,
    spans: list[int] | None,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    walker: ModuleType | None = None,
) -> bytes:
    """Decompress and walk one batch's records; returns the records section the spans
    point into."""
    data = records_payload(batch, header, max_decompressed_size)
    walk_payload(data, header.record_count, spans, walker)
    return data


def validate_records(
    batch: Buffer,
    header: RecordBatchHeader | None = None,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    walker: ModuleType | None = None,
) -> None:
    """Check every record of one batch, building nothing: what a Produce needs, since
    the broker stores the bytes it was sent (Kafka's LogValidator likewise walks records
    with a skip-key-value iterator). Accepts and refuses exactly what
    ``decode_records`` does: both are the same walk."""
    if header is None:
        header = read_batch_header(batch, 0)
    walk_batch(batch, header, None, max_decompressed_size=max_decompressed_size, walker=walker)


def decode_records(
    batch: Buffer,
    header: RecordBatchHeader | None = None,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[Record]:
    """Decode the records of one batch (whole batch bytes, header first)."""
    if header is None:
        header = read_batch_header(batch, 0)
    spans: list[int] = []
    data = walk_batch(batch, header, spans, max_decompressed_size=max_decompressed_size)
    records: list[Record] = []
    append = records.append
    new_record = Record
    read_headers = _read_headers
    it = iter(spans)
    for attributes, ts_delta, offset_delta, k, k_len, v, v_len, h, end in zip(
        it, it, it, it, it, it, it, it, it, strict=True
    ):
        append(
            new_record(
                offset_delta,
                ts_delta,
                None if k_len < 0 else data[k : k + k_len],
                None if v_len < 0 else data[v : v + v_len],
                () if data[h] == 0 else read_headers(data, h, end),
                attributes,
            )
        )
    return records


def iter_records(
    batch: Buffer,
    header: RecordBatchHeader | None = None,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[DecodedRecord]:
    """Records of one batch with absolute offsets and timestamps.

    Under LogAppendTime every record takes the batch's max timestamp, which is
    the time the broker appended it (what Java's DefaultRecordBatch reports).
    """
    if header is None:
        header = read_batch_header(batch, 0)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append = header.timestamp_type == LOG_APPEND_TIME
    for record in decode_records(batch, header, max_decompressed_size=max_decompressed_size):
        timestamp = header.max_timestamp if log_append else base_timestamp + record.timestamp_delta
        yield DecodedRecord(
            base_offset + record.offset_delta, timestamp, record.key, record.value, record.headers
        )


def record_keys(
    batch: Buffer, header: RecordBatchHeader
) -> Iterator[tuple[bytes | None, int, bool]]:
    """(key, offset delta, value is null) of each record: what the cleaner's offset map
    and its all-kept check need. Raises InvalidRecordsError when the records do not
    parse."""
    spans: list[int] = []
    data = walk_batch(batch, header, spans)
    for i in range(0, len(spans), SPAN_FIELDS):
        k, k_len = spans[i + 3], spans[i + 4]
        yield (None if k_len < 0 else data[k : k + k_len]), spans[i + 2], spans[i + 6] < 0


def record_header_spans(data: bytes, start: int, end: int) -> Headers:
    """The headers of a record whose span says they start at ``start``."""
    return () if data[start] == 0 else _read_headers(data, start, end)
