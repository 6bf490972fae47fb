"""Kafka RecordBatch (magic v2): header parsing, Produce validation, record codec.

The broker's hot path never decodes records: it checks a batch's framing and
CRC from the 61-byte header, rewrites the base offset and leader epoch in place
(both sit outside the CRC) and stores the bytes as the client sent them.
Decoding records is for clients, tests and the analytics pipeline.

v2 batch layout (all big-endian; ``DefaultRecordBatch.java``)::

    0  baseOffset int64         27 baseTimestamp int64
    8  batchLength int32        35 maxTimestamp int64
    12 partitionLeaderEpoch     43 producerId int64
    16 magic int8               51 producerEpoch int16
    17 crc uint32 (CRC32C of    53 baseSequence int32
       bytes 21..end)           57 recordCount int32
    21 attributes int16         61 records...
    23 lastOffsetDelta int32

Record layout (``DefaultRecord.java``; zigzag varints)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value,
    headerCount varint, [headerKeyLength varint, key, headerValueLength varint, value]
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from types import ModuleType

import attrs
import crc32c

from broker.protocol import native, record_walk
from broker.protocol.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    CompressionError,
    CompressionType,
    DecompressionLimitError,
    compress,
    decompress,
)
from broker.protocol.error_codes import ErrorCode

__all__ = [
    "BATCH_HEADER_SIZE",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "DecodedRecord",
    "InvalidRecordsError",
    "Record",
    "RecordBatchHeader",
    "decode_records",
    "encode_batch",
    "iter_batches",
    "iter_records",
    "read_batch_header",
    "set_base_offset",
    "set_log_append_time",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "validate_record_set",
    "validate_records",
]

MAGIC_V2 = 2
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = _HEADER.size  # 61
# baseOffset + batchLength: the part of a batch its length field does not count.
LOG_OVERHEAD = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
_LEADER_EPOCH_OFFSET = 12
# Smallest legacy message (v0): Java rejects anything shorter as corrupt before
# it even looks at the magic byte (ByteBufferLogInputStream.nextBatchSize).
_LEGACY_MIN_SIZE = 14

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_FLAG = 0x08
_TRANSACTIONAL_FLAG = 0x10
_CONTROL_FLAG = 0x20
_DELETE_HORIZON_FLAG = 0x40

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

# Every record carries at least length, attributes, timestampDelta, offsetDelta,
# keyLength, valueLength and headerCount: seven bytes.
_MIN_RECORD_SIZE = 7

# Kafka answers a record that does not parse with INVALID_RECORD ("Found invalid
# record structure", DefaultRecord.readFrom); this broker reports malformed
# record data as CORRUPT_MESSAGE by design choice. One constant to flip.
_RECORD_DECODE_ERROR = ErrorCode.CORRUPT_MESSAGE

# The record walk of Produce validation: the mypyc build when one matches the source.
_walker = native.load_native(record_walk)
_walk_records = _walker.walk_records
_WalkError: type[Exception] = _walker.RecordWalkError
WALKER_BUILD = "native" if native.is_native(_walker) else "pure"


class InvalidRecordsError(Exception):
    """A record set the broker must refuse, with the code a Produce answers."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    def __repr__(self) -> str:
        return f"InvalidRecordsError({self.error_code.name}, {self.message!r})"


def _corrupt(message: str) -> InvalidRecordsError:
    return InvalidRecordsError(ErrorCode.CORRUPT_MESSAGE, message)


def _invalid(message: str) -> InvalidRecordsError:
    return InvalidRecordsError(ErrorCode.INVALID_RECORD, message)


# ------------------------------------------------------------------- header


@attrs.frozen(slots=True)
class RecordBatchHeader:
    """The fixed 61-byte prefix of a v2 batch, as read from the wire."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_FLAG else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD


def _peek_framing(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Batch length and magic at ``pos``, rejecting what Java's batch iterator rejects.

    Raises CORRUPT_MESSAGE when fewer than 17 bytes remain, when the length is
    below the smallest legacy message, or when the magic is not 0, 1 or 2.
    """
    remaining = len(buf) - pos
    if remaining < _MAGIC_OFFSET + 1:
        raise _corrupt(f"record set is truncated: {remaining} bytes left at position {pos}")
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    if batch_length < _LEGACY_MIN_SIZE:
        raise _corrupt(
            f"record size {batch_length} is less than the minimum record overhead "
            f"({_LEGACY_MIN_SIZE})"
        )
    magic = buf[pos + _MAGIC_OFFSET]
    if magic > MAGIC_V2:
        raise _corrupt(f"invalid magic found in record: {magic}")
    return batch_length, magic


def _parse_header(buf: bytes | bytearray | memoryview, pos: int) -> RecordBatchHeader:
    """Unpack a v2 header after checking it is whole; no CRC or semantic checks."""
    batch_length, magic = _peek_framing(buf, pos)
    if magic != MAGIC_V2:
        # Kafka: ProduceRequest.validateRecords, InvalidRecordException -> INVALID_RECORD.
        raise _invalid(
            f"only record batches with magic version 2 are supported, found magic {magic}"
        )
    if batch_length + LOG_OVERHEAD < BATCH_HEADER_SIZE:
        raise _corrupt(
            f"record batch is corrupt (the size {batch_length + LOG_OVERHEAD} is smaller "
            f"than the minimum allowed overhead {BATCH_HEADER_SIZE})"
        )
    if pos + LOG_OVERHEAD + batch_length > len(buf):
        raise _corrupt(
            f"record batch at position {pos} is truncated: it declares "
            f"{batch_length + LOG_OVERHEAD} bytes but only {len(buf) - pos} remain"
        )
    return RecordBatchHeader(*_HEADER.unpack_from(buf, pos))


def _check_crc(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> None:
    end = pos + LOG_OVERHEAD + header.batch_length
    computed = crc32c.crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : end])
    if computed != header.crc:
        raise _corrupt(f"record is corrupt (stored crc = {header.crc}, computed crc = {computed})")


def _check_codec(header: RecordBatchHeader) -> None:
    codec = header.attributes & _COMPRESSION_MASK
    if codec > CompressionType.ZSTD:
        raise InvalidRecordsError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression type id {codec}"
        )


def _check_counts(header: RecordBatchHeader) -> None:
    """Sanity that holds for every stored batch, compacted ones included.

    Compaction can drop records (count below lastOffsetDelta + 1) and can leave
    empty batches, so only the impossible cases are refused here.
    """
    if header.record_count < 0:
        raise _corrupt(f"negative record count {header.record_count}")
    if header.record_count > 0 and header.record_count > header.last_offset_delta + 1:
        raise _corrupt(
            f"record count {header.record_count} does not fit in the offset range "
            f"[0, {header.last_offset_delta}]"
        )


def read_batch_header(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> RecordBatchHeader:
    """Parse and check the v2 batch at ``pos`` without touching its records.

    Checks magic, that the whole batch is present, the CRC32C, a known codec
    and that the record count fits the offset range.
    """
    header = _parse_header(buf, pos)
    if verify_crc:
        _check_crc(buf, pos, header)
    _check_codec(header)
    _check_counts(header)
    return header


def iter_batches(
    buf: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
    """Yield each batch of a record set with a zero-copy view of its bytes.

    ``allow_partial_tail`` is for Fetch responses, where a broker may cut the
    last batch short at the size limit and clients skip the fragment.
    """
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        if allow_partial_tail and _is_partial_tail(view, pos):
            return
        header = read_batch_header(view, pos, verify_crc=verify_crc)
        size = header.batch_length + LOG_OVERHEAD
        yield header, view[pos : pos + size]
        pos += size


def _is_partial_tail(view: memoryview, pos: int) -> bool:
    remaining = len(view) - pos
    if remaining < LOG_OVERHEAD:
        return True
    (batch_length,) = _I32.unpack_from(view, pos + 8)
    return int(batch_length) + LOG_OVERHEAD > remaining


# ----------------------------------------------------------- Produce checks


def validate_record_set(
    buf: bytes | bytearray | memoryview,
    *,
    api_version: int | None = None,
    max_batch_size: int | None = None,
    deep: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[RecordBatchHeader]:
    """Check one partition's records of a Produce (v3+) as Kafka's broker would.

    Returns the headers (always exactly one batch once valid). ``api_version``
    is the Produce request's version (None: assume v7+, where zstd is allowed).
    The order and codes follow Kafka:

    1. ``ProduceRequest.validateRecords``: no batch, a batch whose magic is not
       2 (magic 0/1 message sets included), or more than one batch ->
       INVALID_RECORD; zstd before Produce v7 -> UNSUPPORTED_COMPRESSION_TYPE.
       Framing Java's batch iterator refuses (length < 14, magic > 2) ->
       CORRUPT_MESSAGE.
    2. ``UnifiedLog.analyzeAndValidateRecords``: baseOffset != 0 ->
       INVALID_RECORD; batch over ``max_batch_size`` (max.message.bytes) ->
       MESSAGE_TOO_LARGE; size below 61 or CRC mismatch -> CORRUPT_MESSAGE.
    3. ``LogValidator.validateBatch`` (client origin): empty offset range,
       count <= 0, count != lastOffsetDelta + 1, control batch, producer id
       without base sequence -> INVALID_RECORD; LogAppendTime set by the
       producer -> INVALID_TIMESTAMP (``validateTimestamp``).

    Deliberate differences: Java's iterator silently ignores a trailing
    partial batch (and so a lone truncated batch reads as "no batch"); here any
    truncation is CORRUPT_MESSAGE. An unknown codec id is
    UNSUPPORTED_COMPRESSION_TYPE (Kafka fails with an unexpected exception).
    ``deep`` additionally checks every record (``validate_records``, bounded by
    ``max_decompressed_size``), as LogValidator's record loop does.
    """
    header = _validate_single_batch_framing(buf, api_version)
    _validate_append(buf, header, max_batch_size)
    _validate_client_batch(header)
    if deep:
        validate_records(
            memoryview(buf)[: header.size_in_bytes],
            header,
            max_decompressed_size=max_decompressed_size,
        )
    return [header]


def _validate_single_batch_framing(
    buf: bytes | bytearray | memoryview, api_version: int | None
) -> RecordBatchHeader:
    version = "3+" if api_version is None else str(api_version)
    if len(buf) == 0:
        raise _invalid(
            f"Produce requests with version {version} must have at least one record "
            "batch per partition"
        )
    header = _parse_header(buf, 0)
    if (
        api_version is not None
        and api_version < 7
        and header.attributes & _COMPRESSION_MASK == CompressionType.ZSTD
    ):
        raise InvalidRecordsError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {api_version} are not allowed to use ZStandard "
            "compression",
        )
    tail = header.size_in_bytes
    if tail < len(buf):
        if _is_partial_tail(memoryview(buf), tail):
            raise _corrupt(f"record set has {len(buf) - tail} trailing bytes after its batch")
        raise _invalid(
            f"Produce requests with version {version} are only allowed to contain "
            "exactly one record batch per partition"
        )
    return header


def _validate_append(
    buf: bytes | bytearray | memoryview, header: RecordBatchHeader, max_batch_size: int | None
) -> None:
    if header.base_offset != 0:
        raise _invalid(
            f"the baseOffset of the record batch should be 0, but it is {header.base_offset}"
        )
    if max_batch_size is not None and header.size_in_bytes > max_batch_size:
        raise InvalidRecordsError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"the record batch size is {header.size_in_bytes} bytes which exceeds the "
            f"maximum configured value of {max_batch_size}",
        )
    _check_crc(buf, 0, header)
    _check_codec(header)


def _validate_client_batch(header: RecordBatchHeader) -> None:
    if header.last_offset_delta < 0:
        raise _invalid(
            f"batch has an invalid offset range: [{header.base_offset}, {header.last_offset}]"
        )
    if header.record_count <= 0:
        raise _invalid(f"invalid reported count for record batch: {header.record_count}")
    if header.record_count != header.last_offset_delta + 1:
        raise _invalid(
            f"inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.record_count}"
        )
    if header.is_control:
        raise _invalid("clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise _invalid(
            f"invalid sequence number {header.base_sequence} in record batch with "
            f"producerId {header.producer_id}"
        )
    if header.timestamp_type == LOG_APPEND_TIME:
        raise InvalidRecordsError(
            ErrorCode.INVALID_TIMESTAMP,
            "invalid timestamp type in message: producer should not set timestamp type to "
            "LogAppendTime",
        )


# ----------------------------------------------------------- in-place edits


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's offsets; the CRC does not cover them, so it stays valid."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch; like the base offset it sits outside the CRC."""
    _I32.pack_into(buf, pos + _LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: bytearray | memoryview, pos: int, timestamp_type: int, max_timestamp: int
) -> None:
    """Rewrite the timestamp type and max timestamp, then the CRC that covers them.

    A no-op when both already hold, which spares a CRC pass (as Kafka does).
    """
    view = memoryview(buf)
    (attributes,) = _I16.unpack_from(view, pos + _ATTRIBUTES_OFFSET)
    if timestamp_type == LOG_APPEND_TIME:
        new_attributes = attributes | _TIMESTAMP_TYPE_FLAG
    else:
        new_attributes = attributes & ~_TIMESTAMP_TYPE_FLAG
    (current_max,) = _I64.unpack_from(view, pos + _MAX_TIMESTAMP_OFFSET)
    if new_attributes == attributes and current_max == max_timestamp:
        return
    _I16.pack_into(view, pos + _ATTRIBUTES_OFFSET, new_attributes)
    _I64.pack_into(view, pos + _MAX_TIMESTAMP_OFFSET, max_timestamp)
    _rewrite_crc(view, pos)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with the broker's clock; readers then use it
    as every record's timestamp."""
    set_max_timestamp(buf, pos, LOG_APPEND_TIME, timestamp_ms)


def _rewrite_crc(view: memoryview, pos: int) -> None:
    (batch_length,) = _I32.unpack_from(view, pos + 8)
    end = pos + LOG_OVERHEAD + batch_length
    _U32.pack_into(view, pos + _CRC_OFFSET, crc32c.crc32c(view[pos + _ATTRIBUTES_OFFSET : end]))


# ------------------------------------------------------------------ records


@attrs.frozen(slots=True)
class Record:
    """One record as stored inside a batch, with offset and time relative to it."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


@attrs.frozen(slots=True)
class DecodedRecord:
    """A record with absolute offset and timestamp, as a consumer sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class _Truncated(Exception):
    """Internal: a read ran past the end of the records data."""


def _read_varint_slow(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Raw (still zigzag-encoded) varint of up to ``max_bytes`` bytes: 5 for an
    int32, 10 for an int64."""
    result = 0
    shift = 0
    end = len(data)
    for _ in range(max_bytes):
        if pos >= end:
            raise _Truncated
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise _corrupt(f"varint is longer than {max_bytes} bytes")


def decode_records(
    batch: bytes | bytearray | memoryview,
    header: RecordBatchHeader | None = None,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[Record]:
    """Decode the records of one batch (whole batch bytes, header first).

    Decompresses as needed within ``max_decompressed_size``; passing it is
    MESSAGE_TOO_LARGE (Java producers answer that code by splitting the batch),
    data the codec rejects is CORRUPT_MESSAGE. Anything malformed (bad varint,
    lengths past the end, a count that does not match the data) raises
    InvalidRecordsError, never IndexError or struct.error.
    """
    if header is None:
        header = read_batch_header(batch, 0)
    view = memoryview(batch)[BATCH_HEADER_SIZE : header.size_in_bytes]
    data = _records_payload(view, header, max_decompressed_size)
    count = header.record_count
    if count * _MIN_RECORD_SIZE > len(data):
        raise InvalidRecordsError(
            _RECORD_DECODE_ERROR,
            f"batch declares {count} records but holds only {len(data)} bytes of records",
        )
    try:
        records, pos = _decode_all(data, count)
    except (_Truncated, IndexError):
        raise InvalidRecordsError(
            _RECORD_DECODE_ERROR, "record data ends before the declared record count"
        ) from None
    if pos != len(data):
        raise InvalidRecordsError(
            _RECORD_DECODE_ERROR,
            f"incorrect declared batch size: {len(data) - pos} bytes remain after {count} records",
        )
    return records


def validate_records(
    batch: bytes | bytearray | memoryview,
    header: RecordBatchHeader | None = None,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    walker: ModuleType | None = None,
) -> None:
    """Check every record of one batch exactly as ``decode_records`` would, building
    nothing: what a Produce needs, since the broker stores the bytes it was sent.
    ``walker`` is the build of ``record_walk`` to use (tests run each); by default the
    broker's.

    Kafka's LogValidator likewise walks records with a skip-key-value iterator
    instead of materialising them. Accepts and refuses (with the same codes) exactly
    what ``decode_records`` does; tests/records/test_fast_validation.py holds the two
    to that on valid, mutated and arbitrary batches. The walk is ``record_walk``,
    compiled when a native build matches its source (``WALKER``).
    """
    if header is None:
        header = read_batch_header(batch, 0)
    view = memoryview(batch)[BATCH_HEADER_SIZE : header.size_in_bytes]
    data = _records_payload(view, header, max_decompressed_size)
    count = header.record_count
    if count * _MIN_RECORD_SIZE > len(data):
        raise InvalidRecordsError(
            _RECORD_DECODE_ERROR,
            f"batch declares {count} records but holds only {len(data)} bytes of records",
        )
    walk, walk_error = (
        (_walk_records, _WalkError)
        if walker is None
        else (walker.walk_records, walker.RecordWalkError)
    )
    try:
        pos = walk(data, count)
    except IndexError:
        raise InvalidRecordsError(_RECORD_DECODE_ERROR, record_walk.TRUNCATED) from None
    except walk_error as exc:
        raise InvalidRecordsError(_RECORD_DECODE_ERROR, str(exc)) from None
    if pos != len(data):
        raise InvalidRecordsError(
            _RECORD_DECODE_ERROR,
            f"incorrect declared batch size: {len(data) - pos} bytes remain after {count} records",
        )


def _records_payload(
    view: memoryview, header: RecordBatchHeader, max_decompressed_size: int
) -> bytes:
    """The records section as bytes (indexing bytes is the fastest way to scan)."""
    codec = header.attributes & _COMPRESSION_MASK
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
        raise _corrupt(str(exc)) from exc


def _decode_all(data: bytes, count: int) -> tuple[list[Record], int]:
    """The record loop, written out flat because it is the pipeline's hot path.

    Varints of one and two bytes (values below 8192 after zigzag) are decoded
    inline; longer ones go through ``_read_varint_slow``. Fixed fields may read
    past a record's end into the next record: the ``pos != record_end`` check
    refuses that, and reads past the data raise IndexError, which the caller
    turns into an error. Key and value slices are bounded by the record's end.
    """
    records: list[Record] = []
    append = records.append
    new_record = Record
    slow = _read_varint_slow
    pos = 0
    end = len(data)
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = slow(data, pos, 5)
        length = (b >> 1) ^ -(b & 1)
        record_end = pos + length
        if length < _MIN_RECORD_SIZE - 1 or record_end > end:
            raise InvalidRecordsError(
                _RECORD_DECODE_ERROR, f"invalid record length {length} at position {pos}"
            )

        attributes = data[pos]
        pos += 1

        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = slow(data, pos, 10)
        timestamp_delta = (b >> 1) ^ -(b & 1)

        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = slow(data, pos, 5)
        offset_delta = (b >> 1) ^ -(b & 1)

        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = slow(data, pos, 5)
        size = (b >> 1) ^ -(b & 1)
        if size >= 0:
            stop = pos + size
            if stop > record_end:
                raise _Truncated
            key: bytes | None = data[pos:stop]
            pos = stop
        elif size == -1:
            key = None
        else:
            raise InvalidRecordsError(_RECORD_DECODE_ERROR, f"invalid key length {size}")

        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = slow(data, pos, 5)
        size = (b >> 1) ^ -(b & 1)
        if size >= 0:
            stop = pos + size
            if stop > record_end:
                raise _Truncated
            value: bytes | None = data[pos:stop]
            pos = stop
        elif size == -1:
            value = None
        else:
            raise InvalidRecordsError(_RECORD_DECODE_ERROR, f"invalid value length {size}")

        if data[pos] == 0:
            headers: tuple[tuple[str, bytes | None], ...] = ()
            pos += 1
        else:
            headers, pos = _read_headers(data, pos, record_end)
        if pos != record_end:
            raise InvalidRecordsError(
                _RECORD_DECODE_ERROR,
                f"invalid record size: expected to read {record_end - pos} more bytes in the "
                "record payload",
            )
        append(new_record(offset_delta, timestamp_delta, key, value, headers, attributes))
    return records, pos


def _read_signed_varint(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _read_varint_slow(data, pos, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def _read_bytes(body: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """A varint-length-prefixed byte string (-1 = null) that must end by ``end``."""
    size, pos = _read_signed_varint(body, pos)
    if size < 0:
        if size == -1:
            return None, pos
        raise InvalidRecordsError(_RECORD_DECODE_ERROR, f"invalid negative length {size}")
    stop = pos + size
    if stop > end:
        raise _Truncated
    return body[pos:stop], stop


def _read_headers(
    body: bytes, pos: int, end: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = _read_signed_varint(body, pos)
    if count < 0:
        raise InvalidRecordsError(_RECORD_DECODE_ERROR, f"invalid negative header count {count}")
    if count * 2 > end - pos:
        raise _Truncated
    headers = []
    for _ in range(count):
        raw_key, pos = _read_bytes(body, pos, end)
        if raw_key is None:
            raise InvalidRecordsError(_RECORD_DECODE_ERROR, "invalid negative header key size")
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecordsError(
                _RECORD_DECODE_ERROR, "header key is not valid UTF-8"
            ) from exc
        value, pos = _read_bytes(body, pos, end)
        headers.append((key, value))
    return tuple(headers), pos


def iter_records(
    batch: bytes | bytearray | memoryview,
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


# ----------------------------------------------------------------- encoding


def _zigzag_varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    zigzag &= 0xFFFFFFFFFFFFFFFF
    if zigzag < 0x80:
        return _SMALL_VARINTS[zigzag]
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


_SMALL_VARINTS = tuple(bytes((i,)) for i in range(0x80))


def _encode_nullable(data: bytes | None) -> list[bytes]:
    if data is None:
        return [_SMALL_VARINTS[1]]  # zigzag(-1)
    return [_zigzag_varint(len(data)), data]


def _encode_record(record: Record) -> bytes:
    parts = [
        bytes((record.attributes & 0xFF,)),
        _zigzag_varint(record.timestamp_delta),
        _zigzag_varint(record.offset_delta),
        *_encode_nullable(record.key),
        *_encode_nullable(record.value),
        _zigzag_varint(len(record.headers)),
    ]
    for header_key, header_value in record.headers:
        encoded_key = header_key.encode("utf-8")
        parts.append(_zigzag_varint(len(encoded_key)))
        parts.append(encoded_key)
        parts.extend(_encode_nullable(header_value))
    body = b"".join(parts)
    return _zigzag_varint(len(body)) + body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    base_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = CREATE_TIME,
) -> bytes:
    """Build one v2 batch with a valid CRC, the way a producer would.

    ``base_timestamp`` defaults to the wall clock in milliseconds; each record's
    timestamp is ``base_timestamp + timestamp_delta``.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if base_timestamp is None:
        base_timestamp = time.time_ns() // 1_000_000
    payload = compress(compression, b"".join(_encode_record(record) for record in records))
    attributes = int(compression)
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_FLAG
    if is_transactional:
        attributes |= _TRANSACTIONAL_FLAG
    if is_control:
        attributes |= _CONTROL_FLAG
    max_timestamp = base_timestamp + max(record.timestamp_delta for record in records)
    last_offset_delta = max(record.offset_delta for record in records)
    header = bytearray(
        _HEADER.pack(
            base_offset,
            BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[_ATTRIBUTES_OFFSET:]))
    _U32.pack_into(header, _CRC_OFFSET, crc)
    return bytes(header) + payload
