"""What a Produce with bad records gets back, and that garbage only ever raises InvalidRecordsError."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.compression import CompressionType, compress
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import (
    InvalidRecordsError,
    Record,
    decode_records,
    encode_batch,
    iter_batches,
    read_batch_header,
    set_base_offset,
    validate_record_set,
)
from tests.records.helpers import build_v2_batch, fix_crc, legacy_message

BASE_TS = 1_700_000_000_000


def _batch(kind: CompressionType = CompressionType.NONE, count: int = 3) -> bytes:
    records = [Record(i, i, b"k", b"value-%d" % i * 5) for i in range(count)]
    return encode_batch(records, compression=kind, base_timestamp=BASE_TS)


def _code(buf: bytes, **kwargs: Any) -> ErrorCode:
    with pytest.raises(InvalidRecordsError) as info:
        validate_record_set(buf, **kwargs)
    return info.value.error_code


def test_valid_batch_passes() -> None:
    assert validate_record_set(_batch(), api_version=9)[0].record_count == 3


def test_corrupt_crc() -> None:
    buf = bytearray(_batch())
    buf[-1] ^= 0xFF
    assert _code(bytes(buf)) == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(InvalidRecordsError, match="crc"):
        read_batch_header(buf)


def test_crc_not_checked_when_asked() -> None:
    buf = bytearray(_batch())
    buf[-1] ^= 0xFF
    assert read_batch_header(buf, verify_crc=False).record_count == 3


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_hand_built(magic: int) -> None:
    # Kafka: ProduceRequest.validateRecords -> InvalidRecordException -> INVALID_RECORD.
    buf = legacy_message(magic, b"hello", b"key") + legacy_message(magic, b"world", offset=1)
    assert _code(buf) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("kind", [CompressionType.NONE, CompressionType.GZIP])
def test_legacy_message_sets_from_aiokafka(magic: int, kind: CompressionType) -> None:
    builder = LegacyRecordBatchBuilder(magic, int(kind), 1 << 20)
    for i in range(3):
        builder.append(i, timestamp=BASE_TS if magic else None, key=None, value=b"v" * 50)
    assert _code(bytes(builder.build())) == ErrorCode.INVALID_RECORD


def test_unknown_magic_is_corrupt() -> None:
    buf = bytearray(_batch())
    buf[16] = 3
    assert _code(bytes(buf)) == ErrorCode.CORRUPT_MESSAGE


def test_empty_record_set() -> None:
    assert _code(b"") == ErrorCode.INVALID_RECORD


def test_two_batches() -> None:
    assert _code(_batch() + _batch()) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("cut", [1, 11, 16, 30, 60, -1])
def test_truncated_batch(cut: int) -> None:
    batch = _batch()
    assert _code(batch[:cut]) == ErrorCode.CORRUPT_MESSAGE


def test_trailing_partial_batch() -> None:
    assert _code(_batch() + _batch()[:40]) == ErrorCode.CORRUPT_MESSAGE


def test_batch_length_below_header_size() -> None:
    buf = bytearray(_batch())
    struct.pack_into(">i", buf, 8, 30)
    assert _code(bytes(buf[:42])) == ErrorCode.CORRUPT_MESSAGE


def test_zstd_needs_produce_v7() -> None:
    batch = _batch(CompressionType.ZSTD)
    assert _code(batch, api_version=6) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert validate_record_set(batch, api_version=7)


def test_nonzero_base_offset() -> None:
    buf = bytearray(_batch())
    set_base_offset(buf, 0, 5)
    assert _code(bytes(buf)) == ErrorCode.INVALID_RECORD


def test_batch_over_max_message_bytes() -> None:
    batch = _batch()
    assert _code(batch, max_batch_size=len(batch) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    assert validate_record_set(batch, max_batch_size=len(batch))


def _payload(count: int) -> bytes:
    return _batch(count=count)[61:]


@pytest.mark.parametrize(
    ("count", "last_delta"),
    [(0, 0), (3, 1), (3, 5), (-1, 2), (3, -1)],
)
def test_count_and_offset_range_mismatch(count: int, last_delta: int) -> None:
    buf = build_v2_batch(_payload(3), record_count=count, last_offset_delta=last_delta)
    assert _code(buf) == ErrorCode.INVALID_RECORD


def test_control_batch_from_client() -> None:
    buf = build_v2_batch(_payload(1), record_count=1, last_offset_delta=0, attributes=0x20)
    assert _code(buf) == ErrorCode.INVALID_RECORD


def test_producer_id_without_sequence() -> None:
    buf = build_v2_batch(
        _payload(1), record_count=1, last_offset_delta=0, producer_id=3, producer_epoch=0
    )
    assert _code(buf) == ErrorCode.INVALID_RECORD


def test_log_append_time_from_producer() -> None:
    buf = build_v2_batch(_payload(1), record_count=1, last_offset_delta=0, attributes=0x08)
    assert _code(buf) == ErrorCode.INVALID_TIMESTAMP


def test_unknown_codec() -> None:
    buf = build_v2_batch(_payload(1), record_count=1, last_offset_delta=0, attributes=0x05)
    assert _code(buf) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_record_count_larger_than_records_on_decode() -> None:
    # Header-consistent (count == lastOffsetDelta + 1) but the data holds 2 records.
    buf = build_v2_batch(_payload(2), record_count=3, last_offset_delta=2)
    assert validate_record_set(buf)  # header checks alone cannot see it
    assert _code(buf, deep=True) == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(InvalidRecordsError) as info:
        decode_records(buf)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_record_count_smaller_than_records_on_decode() -> None:
    buf = build_v2_batch(_payload(3), record_count=2, last_offset_delta=1)
    with pytest.raises(InvalidRecordsError) as info:
        decode_records(buf)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("kind", [k for k in CompressionType if k != CompressionType.NONE])
def test_decompression_bomb_in_a_batch(kind: CompressionType) -> None:
    bomb = compress(kind, bytes(16 * 1024 * 1024))
    buf = build_v2_batch(bomb, record_count=1, last_offset_delta=0, attributes=int(kind))
    assert validate_record_set(buf)  # header validation does not decompress
    with pytest.raises(InvalidRecordsError) as info:
        decode_records(buf, max_decompressed_size=1024 * 1024)
    assert info.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_garbage_compressed_payload() -> None:
    buf = build_v2_batch(b"not lz4 at all", record_count=1, last_offset_delta=0, attributes=3)
    with pytest.raises(InvalidRecordsError) as info:
        decode_records(buf)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


# ------------------------------------------------------------------- fuzzing


def _all_parsers(buf: bytes) -> None:
    """Run every entry point; each may succeed or raise InvalidRecordsError only."""
    for call in (
        lambda: validate_record_set(buf, deep=True, max_decompressed_size=1 << 20),
        lambda: read_batch_header(buf),
        lambda: [
            decode_records(view, h, max_decompressed_size=1 << 20) for h, view in iter_batches(buf)
        ],
        lambda: decode_records(
            buf, read_batch_header(buf, verify_crc=False), max_decompressed_size=1 << 20
        ),
    ):
        with contextlib.suppress(InvalidRecordsError):
            call()


@given(st.binary(max_size=200))
def test_arbitrary_bytes(buf: bytes) -> None:
    _all_parsers(buf)


@given(st.binary(min_size=49, max_size=200))
def test_arbitrary_bytes_behind_a_plausible_header(tail: bytes) -> None:
    # Force magic 2 and a matching length so the parsers get past the framing.
    buf = bytearray(bytes(12) + tail)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    buf[16] = 2
    struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] & 0x07)
    _all_parsers(fix_crc(buf))


@given(
    kind=st.sampled_from(list(CompressionType)),
    data=st.data(),
)
def test_mutated_valid_batches(kind: CompressionType, data: st.DataObject) -> None:
    buf = bytearray(_batch(kind, count=4))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        pos = data.draw(st.integers(min_value=0, max_value=len(buf) - 1))
        buf[pos] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(buf)))
    mutated = bytes(buf[:cut])
    _all_parsers(mutated)
    if cut >= 61:
        # Fix the CRC (and length) so the mutation reaches the record decoder.
        fixed = bytearray(mutated)
        struct.pack_into(">i", fixed, 8, len(fixed) - 12)
        _all_parsers(fix_crc(fixed))


@given(data=st.data())
def test_mutated_record_bytes_uncompressed(data: st.DataObject) -> None:
    buf = bytearray(_batch(count=6))
    pos = data.draw(st.integers(min_value=61, max_value=len(buf) - 1))
    buf[pos] = data.draw(st.integers(min_value=0, max_value=255))
    _all_parsers(fix_crc(buf))
