"""Kafka's LogValidator: what a client's batch must be before the log stores it.

Produce reads a partition's header once (`LogValidator.read_header`, Kafka's
ProduceRequest.validateRecords) and hands the batch, that header and the request's
context (`ClientAppend`) to the log's append, which runs the rest once per batch, as
UnifiedLog.append runs LogValidator.validateMessagesAndAssignOffsets: the batch
checks and one walk of its records (`check_batch`), the request's own checks
(`ClientAppend.before_records`), the records' timestamps and keys from that same walk
(`check_records`), then offsets, the leader epoch and LogAppendTime (`assign_offsets`)
without reading the header again. Codes and their order follow Kafka (see
`validate_record_set`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from broker.protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.batch_checks import (
    check_codec,
    check_crc,
    is_partial_tail,
    parse_whole_header,
)
from broker.protocol.record_batch.errors import InvalidRecordsError, corrupt, invalid
from broker.protocol.record_batch.layout import (
    COMPRESSION_MASK,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_FLAG,
    Buffer,
    RecordBatchHeader,
    WritableBuffer,
    crc_at,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from broker.protocol.record_batch.record_sinks import SPAN_FIELDS, walk_batch

LONG_MAX = 2**63 - 1


class ValidatedBatch(NamedTuple):
    """A client batch that passed `LogValidator.check_batch`: its exact bytes, its
    header, and (when record checks need them) the walk's spans over ``records``.
    (A NamedTuple: made once per partition of every Produce, it must be cheap.)"""

    batch: memoryview
    header: RecordBatchHeader
    records: bytes = b""
    spans: tuple[int, ...] | None = None


class ClientAppend(NamedTuple):
    """What only the Produce request knows about a client's batch, handed to the log's
    append with the batch (Kafka's AppendOrigin.CLIENT with the request's context).

    ``before_records`` runs the checks that need the request (KIP-890's verification of
    a transactional batch, acks=all against min.insync.replicas) after the batch checks
    and before the record checks, the order this broker answers in; None when there are
    none (the common case: no closure per partition). ``write_on_loop``: the request
    came while the event loop has no small requests to protect, so the log may write a
    large batch there rather than hop to a worker thread."""

    before_records: Callable[[RecordBatchHeader], Awaitable[None]] | None = None
    write_on_loop: bool = False


CLIENT_APPEND = ClientAppend()
"""A client's batch with no request-level checks to run."""
CLIENT_APPEND_ON_LOOP = ClientAppend(write_on_loop=True)
"""The same, on a quiet event loop."""


class LogValidator(NamedTuple):
    """The checks of one partition's client batches, with the topic's settings.

    ``api_version`` is the Produce request's version (None: assume v7+, where zstd is
    allowed; only `read_header` uses it); ``max_batch_size`` is max.message.bytes;
    ``segment_bytes`` is segment.bytes; the timestamp limits are KIP-937's
    message.timestamp.before/after.max.ms (Long.MAX: no limit). A NamedTuple, since it
    must be cheap to build: the log keeps one per topic configuration.
    """

    api_version: int | None = None
    max_batch_size: int | None = None
    log_append_time: bool = False
    compacted: bool = False
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX
    topic: str = ""
    partition: int = -1
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    segment_bytes: int | None = None

    @property
    def needs_records(self) -> bool:
        """Whether `check_records` reads records (else the walk builds nothing)."""
        return self.compacted or (
            not self.log_append_time
            and (self.timestamp_before_max_ms < LONG_MAX or self.timestamp_after_max_ms < LONG_MAX)
        )

    def read_header(self, batch: Buffer) -> RecordBatchHeader:
        """ProduceRequest.validateRecords: exactly one whole v2 batch (step 1 of
        `validate_record_set`). The one parse of the header a Produce makes."""
        return read_single_batch_header(batch, self.api_version)

    def check_header(self, header: RecordBatchHeader) -> None:
        """The first of `check_batch`'s checks, those the header alone decides (the base
        offset, message.max.bytes): cheap, so they run before a large batch's walk is
        handed to a worker thread."""
        check_append_header(header, self.max_batch_size)

    def check_batch(self, batch: Buffer, header: RecordBatchHeader) -> ValidatedBatch:
        """Steps 2 and 3 of `validate_record_set`, every record walked once, then
        whether the batch fits a segment (UnifiedLog.append: a batch larger than a whole
        segment can never be stored)."""
        check_append(batch, header, self.max_batch_size)
        check_client_batch(header)
        view = memoryview(batch)[: header.size_in_bytes]
        spans: list[int] | None = [] if self.needs_records else None
        data = walk_batch(view, header, spans, max_decompressed_size=self.max_decompressed_size)
        if self.segment_bytes is not None and header.size_in_bytes > self.segment_bytes:
            raise InvalidRecordsError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"the record batch is {header.size_in_bytes} bytes, larger than the segment "
                f"size {self.segment_bytes}",
            )
        if spans is None:
            return ValidatedBatch(view, header)
        return ValidatedBatch(view, header, data, tuple(spans))

    def check_records(self, validated: ValidatedBatch, now_ms: int) -> None:
        """LogValidator.validateTimestamp (KIP-937, CreateTime topics) and validateKey
        (a compacted topic keeps records by key, so a keyless one could never be
        cleaned): raises InvalidRecordsError naming the first record at fault."""
        spans = validated.spans
        if spans is None:
            return
        if not self.log_append_time:
            _check_timestamps(
                spans,
                validated.header.base_timestamp,
                now_ms,
                self.timestamp_before_max_ms,
                self.timestamp_after_max_ms,
            )
        if self.compacted:
            for index, key_length in enumerate(spans[4::SPAN_FIELDS]):
                if key_length < 0:
                    raise InvalidRecordsError(
                        ErrorCode.INVALID_RECORD,
                        "Compacted topic cannot accept message without key in topic partition "
                        f"{self.topic}-{self.partition}.",
                        record_index=index,
                    )


def _check_timestamps(
    spans: tuple[int, ...], base_timestamp: int, now_ms: int, before_max_ms: int, after_max_ms: int
) -> None:
    if before_max_ms >= LONG_MAX and after_max_ms >= LONG_MAX:
        return
    # The batch's base timestamp is not its minimum: a producer may give later records
    # earlier timestamps (negative deltas).
    low, high = now_ms - before_max_ms, now_ms + after_max_ms
    for index, delta in enumerate(spans[1::SPAN_FIELDS]):
        timestamp = base_timestamp + delta
        if timestamp < low:
            raise InvalidRecordsError(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {timestamp} of message with offset {index} is before the allowed "
                f"range (message.timestamp.before.max.ms={before_max_ms})",
                record_index=index,
            )
        if timestamp > high:
            raise InvalidRecordsError(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {timestamp} of message with offset {index} is after the allowed "
                f"range (message.timestamp.after.max.ms={after_max_ms})",
                record_index=index,
            )


def assign_offsets(
    data: WritableBuffer,
    header: RecordBatchHeader,
    base_offset: int,
    leader_epoch: int,
    append_time_ms: int | None,
) -> RecordBatchHeader:
    """LogValidator.assignOffsets for a batch the log is about to store (``data``, whose
    header read ``header``): offsets, the leader epoch and, for LogAppendTime topics, the
    broker's clock (rewriting the CRC). Returns the stored header, derived rather than
    read again."""
    set_base_offset(data, 0, base_offset)
    set_partition_leader_epoch(data, 0, leader_epoch)
    crc, attributes, max_timestamp = header.crc, header.attributes, header.max_timestamp
    if append_time_ms is not None:
        set_log_append_time(data, 0, append_time_ms)
        crc = crc_at(data, 0)
        attributes |= TIMESTAMP_TYPE_FLAG
        max_timestamp = append_time_ms
    # Built directly: attrs.evolve costs more than the rest of the append's bookkeeping.
    return RecordBatchHeader(
        base_offset,
        header.batch_length,
        leader_epoch,
        header.magic,
        crc,
        attributes,
        header.last_offset_delta,
        header.base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.record_count,
    )


# ----------------------------------------------------------- Produce checks


def validate_record_set(
    buf: Buffer,
    *,
    api_version: int | None = None,
    max_batch_size: int | None = None,
    deep: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[RecordBatchHeader]:
    """Check one partition's records of a Produce (v3+) as Kafka's broker would.

    Returns the headers (always exactly one batch once valid). The order and codes
    follow Kafka:

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
    ``deep`` additionally walks every record (bounded by ``max_decompressed_size``),
    as LogValidator's record loop does.
    """
    header = read_single_batch_header(buf, api_version)
    check_append(buf, header, max_batch_size)
    check_client_batch(header)
    if deep:
        walk_batch(
            memoryview(buf)[: header.size_in_bytes],
            header,
            None,
            max_decompressed_size=max_decompressed_size,
        )
    return [header]


def read_single_batch_header(buf: Buffer, api_version: int | None) -> RecordBatchHeader:
    header = read_first_header(buf, api_version)
    check_single_batch(buf, header, api_version)
    return header


def read_first_header(buf: Buffer, api_version: int | None) -> RecordBatchHeader:
    """The first batch's header, whole and v2 (no CRC or semantic checks)."""
    if len(buf) == 0:
        raise invalid(
            f"Produce requests with version {_version(api_version)} must have at least one "
            "record batch per partition"
        )
    return parse_whole_header(buf, 0)


def check_single_batch(buf: Buffer, header: RecordBatchHeader, api_version: int | None) -> None:
    """No zstd before Produce v7, and nothing after the one batch."""
    if (
        api_version is not None
        and api_version < 7
        and header.attributes & COMPRESSION_MASK == CompressionType.ZSTD
    ):
        raise InvalidRecordsError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {api_version} are not allowed to use ZStandard "
            "compression",
        )
    tail = header.size_in_bytes
    if tail < len(buf):
        if is_partial_tail(buf, tail):
            raise corrupt(f"record set has {len(buf) - tail} trailing bytes after its batch")
        raise invalid(
            f"Produce requests with version {_version(api_version)} are only allowed to "
            "contain exactly one record batch per partition"
        )


def _version(api_version: int | None) -> str:
    return "3+" if api_version is None else str(api_version)


def check_append(buf: Buffer, header: RecordBatchHeader, max_batch_size: int | None) -> None:
    check_append_header(header, max_batch_size)
    check_crc(buf, 0, header)
    check_codec(header)


def check_append_header(header: RecordBatchHeader, max_batch_size: int | None) -> None:
    """The checks `check_append` makes first, from the header alone: a batch refused by
    them is refused before any of its bytes are read (nor sent to a worker thread)."""
    if header.base_offset != 0:
        raise invalid(
            f"the baseOffset of the record batch should be 0, but it is {header.base_offset}"
        )
    if max_batch_size is not None and header.size_in_bytes > max_batch_size:
        raise InvalidRecordsError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"the record batch size is {header.size_in_bytes} bytes which exceeds the "
            f"maximum configured value of {max_batch_size}",
        )


def check_client_batch(header: RecordBatchHeader) -> None:
    if header.last_offset_delta < 0:
        raise invalid(
            f"batch has an invalid offset range: [{header.base_offset}, {header.last_offset}]"
        )
    if header.record_count <= 0:
        raise invalid(f"invalid reported count for record batch: {header.record_count}")
    if header.record_count != header.last_offset_delta + 1:
        raise invalid(
            f"inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.record_count}"
        )
    if header.is_control:
        raise invalid("clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise invalid(
            f"invalid sequence number {header.base_sequence} in record batch with "
            f"producerId {header.producer_id}"
        )
    if header.timestamp_type == LOG_APPEND_TIME:
        raise InvalidRecordsError(
            ErrorCode.INVALID_TIMESTAMP,
            "invalid timestamp type in message: producer should not set timestamp type to "
            "LogAppendTime",
        )
