"""Test helpers built from Kafka's documented layouts, independent of the code under test."""

from __future__ import annotations

import struct
import zlib

import crc32c
from hypothesis import strategies as st

from broker.protocol.records import Record

V2_HEADER = struct.Struct(">qiibIhiqqqhii")


def build_v2_batch(
    records_payload: bytes,
    *,
    record_count: int,
    last_offset_delta: int,
    attributes: int = 0,
    base_offset: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
) -> bytes:
    """A v2 batch laid out from Kafka's protocol guide, CRC32C over attributes..end."""
    header = bytearray(
        V2_HEADER.pack(
            base_offset,
            V2_HEADER.size - 12 + len(records_payload),
            -1,
            magic,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    )
    batch = header + records_payload
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def fix_crc(batch: bytes | bytearray) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def legacy_message(magic: int, value: bytes, key: bytes | None = None, offset: int = 0) -> bytes:
    """A v0/v1 message (the pre-0.11 format): offset, size, CRC32, magic, attributes,
    [timestamp for v1], key, value."""
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", 1_700_000_000_000)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body) & 0xFFFFFFFF
    message = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(message)) + message


header_keys = st.text(max_size=8)
nullable_bytes = st.none() | st.binary(max_size=48)
headers_strategy = st.lists(st.tuples(header_keys, nullable_bytes), max_size=3).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn, max_size: int = 12) -> list[Record]:
    """Records with consecutive offset deltas, as a producer writes them."""
    count = draw(st.integers(min_value=1, max_value=max_size))
    return [
        Record(
            offset_delta=index,
            timestamp_delta=draw(st.integers(min_value=-(2**31), max_value=2**40)),
            key=draw(nullable_bytes),
            value=draw(nullable_bytes | st.just(b"x" * 300)),
            headers=draw(headers_strategy),
        )
        for index in range(count)
    ]
