"""Reading batches out of a record set: framing, CRC, codec and count checks on headers."""

from __future__ import annotations

from collections.abc import Iterator

from broker.protocol.compression import CompressionType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.errors import InvalidRecordsError, corrupt, invalid
from broker.protocol.record_batch.layout import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    LEGACY_MIN_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    Buffer,
    RecordBatchHeader,
    batch_length_at,
    crc_of,
    parse_header,
)


def peek_framing(buf: Buffer, pos: int) -> tuple[int, int]:
    """Batch length and magic at ``pos``, rejecting what Java's batch iterator rejects.

    Raises CORRUPT_MESSAGE when fewer than 17 bytes remain, when the length is
    below the smallest legacy message, or when the magic is not 0, 1 or 2.
    """
    remaining = len(buf) - pos
    if remaining < MAGIC_OFFSET + 1:
        raise corrupt(f"record set is truncated: {remaining} bytes left at position {pos}")
    batch_length = batch_length_at(buf, pos)
    if batch_length < LEGACY_MIN_SIZE:
        raise corrupt(
            f"record size {batch_length} is less than the minimum record overhead "
            f"({LEGACY_MIN_SIZE})"
        )
    magic = buf[pos + MAGIC_OFFSET]
    if magic > MAGIC_V2:
        raise corrupt(f"invalid magic found in record: {magic}")
    return batch_length, magic


def parse_whole_header(buf: Buffer, pos: int = 0) -> RecordBatchHeader:
    """Unpack a v2 header after checking it is whole; no CRC or semantic checks."""
    batch_length, magic = peek_framing(buf, pos)
    if magic != MAGIC_V2:
        # Kafka: ProduceRequest.validateRecords, InvalidRecordException -> INVALID_RECORD.
        raise invalid(
            f"only record batches with magic version 2 are supported, found magic {magic}"
        )
    if batch_length + LOG_OVERHEAD < BATCH_HEADER_SIZE:
        raise corrupt(
            f"record batch is corrupt (the size {batch_length + LOG_OVERHEAD} is smaller "
            f"than the minimum allowed overhead {BATCH_HEADER_SIZE})"
        )
    if pos + LOG_OVERHEAD + batch_length > len(buf):
        raise corrupt(
            f"record batch at position {pos} is truncated: it declares "
            f"{batch_length + LOG_OVERHEAD} bytes but only {len(buf) - pos} remain"
        )
    return parse_header(buf, pos)


def check_crc(buf: Buffer, pos: int, header: RecordBatchHeader) -> None:
    computed = crc_of(buf, pos, pos + header.size_in_bytes)
    if computed != header.crc:
        raise corrupt(f"record is corrupt (stored crc = {header.crc}, computed crc = {computed})")


def check_codec(header: RecordBatchHeader) -> None:
    codec = header.attributes & COMPRESSION_MASK
    if codec > CompressionType.ZSTD:
        raise InvalidRecordsError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression type id {codec}"
        )


def check_counts(header: RecordBatchHeader) -> None:
    """Sanity that holds for every stored batch, compacted ones included.

    Compaction can drop records (count below lastOffsetDelta + 1) and can leave
    empty batches, so only the impossible cases are refused here.
    """
    if header.record_count < 0:
        raise corrupt(f"negative record count {header.record_count}")
    if header.record_count > 0 and header.record_count > header.last_offset_delta + 1:
        raise corrupt(
            f"record count {header.record_count} does not fit in the offset range "
            f"[0, {header.last_offset_delta}]"
        )


def read_batch_header(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> RecordBatchHeader:
    """Parse and check the v2 batch at ``pos`` without touching its records.

    Checks magic, that the whole batch is present, the CRC32C, a known codec
    and that the record count fits the offset range.
    """
    header = parse_whole_header(buf, pos)
    if verify_crc:
        check_crc(buf, pos, header)
    check_codec(header)
    check_counts(header)
    return header


def iter_batches(
    buf: Buffer, *, verify_crc: bool = True, allow_partial_tail: bool = False
) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
    """Yield each batch of a record set with a zero-copy view of its bytes.

    ``allow_partial_tail`` is for Fetch responses, where a broker may cut the
    last batch short at the size limit and clients skip the fragment.
    """
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        if allow_partial_tail and is_partial_tail(view, pos):
            return
        header = read_batch_header(view, pos, verify_crc=verify_crc)
        size = header.size_in_bytes
        yield header, view[pos : pos + size]
        pos += size


def is_partial_tail(view: Buffer, pos: int) -> bool:
    remaining = len(view) - pos
    if remaining < LOG_OVERHEAD:
        return True
    return batch_length_at(view, pos) + LOG_OVERHEAD > remaining
