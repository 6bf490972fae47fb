"""Where every field of a RecordBatch v2 sits: the one module that knows byte positions.

Every other module (the log, the cleaner, Produce, Fetch, the pipeline, the client)
reads and edits batches through these names, so the layout is written down once.

v2 batch layout (all big-endian; ``DefaultRecordBatch.java``)::

    0  baseOffset int64         27 baseTimestamp int64
    8  batchLength int32        35 maxTimestamp int64
    12 partitionLeaderEpoch     43 producerId int64
    16 magic int8               51 producerEpoch int16
    17 crc uint32 (CRC32C of    53 baseSequence int32
       bytes 21..end)           57 recordCount int32
    21 attributes int16         61 records...
    23 lastOffsetDelta int32

Record layout (``DefaultRecord.java``; zigzag varints), walked by ``walk.py``::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value,
    headerCount varint, [headerKeyLength varint, key, headerValueLength varint, value]
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from broker.protocol.compression import CompressionType

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview

MAGIC_V2 = 2
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the part of a batch its length field does not count."""
LENGTH_OFFSET = 8
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
MAX_TIMESTAMP_OFFSET = 35
# Smallest legacy message (v0): Java rejects anything shorter as corrupt before
# it even looks at the magic byte (ByteBufferLogInputStream.nextBatchSize).
LEGACY_MIN_SIZE = 14

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

# Every record carries at least length, attributes, timestampDelta, offsetDelta,
# keyLength, valueLength and headerCount: seven bytes.
MIN_RECORD_SIZE = 7

_FRAME = struct.Struct(">qiibIhi")  # the header up to lastOffsetDelta (27 bytes)
FRAME_SIZE = _FRAME.size
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class RecordBatchHeader(NamedTuple):
    """The fixed 61-byte prefix of a v2 batch, as read from the wire.

    A NamedTuple rather than an attrs class: every Produce, Fetch read, recovery and
    cleaner pass builds one per batch, and a tuple is built several times faster."""

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
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_FLAG else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD


def parse_header(buf: Buffer, pos: int = 0) -> RecordBatchHeader:
    """Unpack the 61 header bytes at ``pos`` without any check (callers check framing)."""
    return RecordBatchHeader(*HEADER.unpack_from(buf, pos))


def pack_header(header: RecordBatchHeader) -> bytearray:
    """The header's 61 bytes as they are (CRC included; see `write_crc`)."""
    return bytearray(
        HEADER.pack(
            header.base_offset,
            header.batch_length,
            header.partition_leader_epoch,
            header.magic,
            header.crc,
            header.attributes,
            header.last_offset_delta,
            header.base_timestamp,
            header.max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.record_count,
        )
    )


# ---------------------------------------------------------- single fields


def batch_length_at(buf: Buffer, pos: int = 0) -> int:
    """The batchLength field (needs LOG_OVERHEAD bytes at ``pos``)."""
    length: int = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    return length


def batch_size_at(buf: Buffer, pos: int = 0) -> int:
    """Bytes the batch at ``pos`` declares, its first 12 included."""
    return batch_length_at(buf, pos) + LOG_OVERHEAD


def base_offset_at(buf: Buffer, pos: int = 0) -> int:
    offset: int = _I64.unpack_from(buf, pos)[0]
    return offset


def last_offset_at(buf: Buffer, pos: int = 0) -> int:
    """baseOffset + lastOffsetDelta (needs the first 27 bytes at ``pos``)."""
    delta: int = _I32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]
    return base_offset_at(buf, pos) + delta


def frame_at(buf: Buffer, pos: int = 0) -> tuple[int, int, int, int]:
    """(baseOffset, size, magic, lastOffset) of the batch at ``pos`` in one read: what
    a scan over stored batches checks per batch (needs FRAME_SIZE bytes)."""
    base, length, _, magic, _, _, delta = _FRAME.unpack_from(buf, pos)
    return base, length + LOG_OVERHEAD, magic, base + delta


def magic_at(buf: Buffer, pos: int = 0) -> int:
    return buf[pos + MAGIC_OFFSET]


def crc_at(buf: Buffer, pos: int = 0) -> int:
    """The CRC the batch at ``pos`` stores."""
    crc: int = _U32.unpack_from(buf, pos + CRC_OFFSET)[0]
    return crc


def crc_of(buf: Buffer, pos: int, end: int) -> int:
    """CRC32C of what the batch's CRC covers: attributes up to ``end``."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end])


# ---------------------------------------------------------- in-place edits


def set_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Assign the batch's offsets; the CRC does not cover them, so it stays valid."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Stamp the leader epoch; like the base offset it sits outside the CRC."""
    _I32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: WritableBuffer, pos: int, timestamp_type: int, max_timestamp: int
) -> None:
    """Rewrite the timestamp type and max timestamp, then the CRC that covers them.

    A no-op when both already hold, which spares a CRC pass (as Kafka does).
    """
    view = memoryview(buf)
    (attributes,) = _I16.unpack_from(view, pos + ATTRIBUTES_OFFSET)
    if timestamp_type == LOG_APPEND_TIME:
        new_attributes = attributes | TIMESTAMP_TYPE_FLAG
    else:
        new_attributes = attributes & ~TIMESTAMP_TYPE_FLAG
    (current_max,) = _I64.unpack_from(view, pos + MAX_TIMESTAMP_OFFSET)
    if new_attributes == attributes and current_max == max_timestamp:
        return
    _I16.pack_into(view, pos + ATTRIBUTES_OFFSET, new_attributes)
    _I64.pack_into(view, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    write_crc(view, pos)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with the broker's clock; readers then use it
    as every record's timestamp."""
    set_max_timestamp(buf, pos, LOG_APPEND_TIME, timestamp_ms)


def set_crc_covered_fields(
    buf: WritableBuffer, pos: int, *, attributes: int, last_offset_delta: int, max_timestamp: int
) -> None:
    """Overwrite attributes, lastOffsetDelta and maxTimestamp (the cleaner keeps the
    original batch's), then the CRC that covers them."""
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _I32.pack_into(buf, pos + LAST_OFFSET_DELTA_OFFSET, last_offset_delta)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    write_crc(buf, pos)


def write_crc(buf: WritableBuffer, pos: int = 0, crc: int | None = None) -> None:
    """Store the CRC of the batch at ``pos`` (computed over its bytes when not given)."""
    if crc is None:
        crc = crc_of(buf, pos, pos + batch_size_at(buf, pos))
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
