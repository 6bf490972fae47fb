"""Building v2 batches, the way a producer does (clients, markers, the cleaner, tests)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import crc32c

from broker.protocol.compression import CompressionType, compress
from broker.protocol.record_batch.layout import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    pack_header,
    write_crc,
)
from broker.protocol.record_batch.record_sinks import Record

_SMALL_VARINTS = tuple(bytes((i,)) for i in range(0x80))


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
        attributes |= TIMESTAMP_TYPE_FLAG
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    header = RecordBatchHeader(
        base_offset=base_offset,
        batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch=partition_leader_epoch,
        magic=MAGIC_V2,
        crc=0,
        attributes=attributes,
        last_offset_delta=max(record.offset_delta for record in records),
        base_timestamp=base_timestamp,
        max_timestamp=base_timestamp + max(record.timestamp_delta for record in records),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
    )
    return _with_crc(pack_header(header), payload)


def encode_empty_batch(header: RecordBatchHeader) -> bytearray:
    """Kafka's retained empty batch: the header alone, no records, so that a producer's
    last sequence and epoch stay in the log (the cleaner keeps one)."""
    empty = RecordBatchHeader(
        base_offset=header.base_offset,
        batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD,
        partition_leader_epoch=header.partition_leader_epoch,
        magic=header.magic,
        crc=0,
        attributes=header.attributes & ~COMPRESSION_MASK,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=0,
    )
    data = pack_header(empty)
    write_crc(data)
    return data


def _with_crc(head: bytearray, payload: bytes) -> bytes:
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(head)[ATTRIBUTES_OFFSET:]))
    write_crc(head, 0, crc)
    return bytes(head) + payload
