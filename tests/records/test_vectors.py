"""Known-answer tests: CRC32C vectors and a v2 batch whose bytes come from outside our code."""

from __future__ import annotations

import struct

import crc32c

from broker.protocol.compression import CompressionType
from broker.protocol.records import (
    BATCH_HEADER_SIZE,
    CREATE_TIME,
    Record,
    decode_records,
    encode_batch,
    iter_records,
    read_batch_header,
)
from tests.records.helpers import build_v2_batch

# Produced by kafka-python 3.0.12's DefaultRecordBatchBuilder (magic 2, no codec):
# record 0 at 1700000000000 key=b"key" value=b"value" headers=[("h", b"v")];
# record 1 at 1700000000005 key=None value=b"second".
KAFKA_PYTHON_BATCH = bytes.fromhex(
    "0000000000000000000000510000000002c7788e600000000000010000018bcfe568000000018bcfe5"
    "6805ffffffffffffffffffffffffffff0000000224000000066b65790a76616c7565020268027618000a"
    "02010c7365636f6e6400"
)


def test_crc32c_check_value() -> None:
    # The CRC-32C "check" value from the Castagnoli catalogue.
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_crc32c_rfc3720_vectors() -> None:
    # iSCSI (RFC 3720 B.4) test patterns.
    assert crc32c.crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c.crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c.crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


def test_kafka_python_vector_crc_is_crc32c_of_attributes_to_end() -> None:
    (stored,) = struct.unpack_from(">I", KAFKA_PYTHON_BATCH, 17)
    assert stored == crc32c.crc32c(KAFKA_PYTHON_BATCH[21:])
    header = read_batch_header(KAFKA_PYTHON_BATCH)
    assert header.crc == stored == 0xC7788E60
    assert header.magic == 2
    assert header.batch_length == len(KAFKA_PYTHON_BATCH) - 12
    assert header.record_count == 2
    assert header.last_offset_delta == 1
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_005
    assert header.producer_id == -1
    assert header.compression == CompressionType.NONE
    assert header.timestamp_type == CREATE_TIME


def test_kafka_python_vector_decodes() -> None:
    assert decode_records(KAFKA_PYTHON_BATCH) == [
        Record(0, 0, b"key", b"value", (("h", b"v"),)),
        Record(1, 5, None, b"second", ()),
    ]
    offsets = [(r.offset, r.timestamp) for r in iter_records(KAFKA_PYTHON_BATCH)]
    assert offsets == [(0, 1_700_000_000_000), (1, 1_700_000_000_005)]


def test_encode_batch_reproduces_kafka_python_bytes() -> None:
    ours = encode_batch(
        [
            Record(0, 0, b"key", b"value", (("h", b"v"),)),
            Record(1, 5, None, b"second", ()),
        ],
        base_timestamp=1_700_000_000_000,
        partition_leader_epoch=0,
    )
    assert ours == KAFKA_PYTHON_BATCH


def test_hand_built_batch_from_protocol_guide() -> None:
    # One record with every byte spelled out (varints are zigzag: n -> 2n).
    record = bytes(
        [
            0x12,  # length 9 (zigzag 18)
            0x00,  # attributes
            0x04,  # timestampDelta 2
            0x00,  # offsetDelta 0
            0x02,  # keyLength 1
            ord("k"),
            0x04,  # valueLength 2
            ord("v"),
            ord("w"),
            0x00,  # headers count 0
        ]
    )
    batch = build_v2_batch(
        record, record_count=1, last_offset_delta=0, base_timestamp=100, max_timestamp=102
    )
    assert len(batch) == BATCH_HEADER_SIZE + len(record)
    assert decode_records(batch) == [Record(0, 2, b"k", b"vw")]
    assert encode_batch([Record(0, 2, b"k", b"vw")], base_timestamp=100) == batch
