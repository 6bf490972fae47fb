"""encode_batch -> header/validate -> decode round trips and in-place header edits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.compression import CompressionType
from broker.protocol.records import (
    LOG_APPEND_TIME,
    Record,
    decode_records,
    encode_batch,
    iter_batches,
    iter_records,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
    validate_record_set,
)
from tests.records.helpers import record_lists

BASE_TS = 1_700_000_000_000


@given(records=record_lists(), kind=st.sampled_from(list(CompressionType)))
def test_round_trip_every_codec(records: list[Record], kind: CompressionType) -> None:
    batch = encode_batch(records, compression=kind, base_timestamp=BASE_TS)
    header = read_batch_header(batch)
    assert header.compression == kind
    assert header.record_count == len(records)
    assert header.size_in_bytes == len(batch)
    assert header.max_timestamp == BASE_TS + max(r.timestamp_delta for r in records)
    assert validate_record_set(batch) == [header]
    assert decode_records(batch) == records
    assert decode_records(memoryview(batch), header) == records


@given(
    records=record_lists(max_size=4),
    kind=st.sampled_from(list(CompressionType)),
    base_offset=st.integers(min_value=0, max_value=2**62),
    epoch=st.integers(min_value=-1, max_value=2**31 - 1),
)
def test_offset_and_epoch_rewrites_keep_crc(
    records: list[Record], kind: CompressionType, base_offset: int, epoch: int
) -> None:
    buf = bytearray(encode_batch(records, compression=kind, base_timestamp=BASE_TS))
    crc_before = read_batch_header(buf).crc
    set_base_offset(buf, 0, base_offset)
    set_partition_leader_epoch(buf, 0, epoch)
    header = read_batch_header(buf)  # verifies the CRC
    assert header.crc == crc_before
    assert header.base_offset == base_offset
    assert header.partition_leader_epoch == epoch
    assert [r.offset for r in iter_records(buf)] == [base_offset + r.offset_delta for r in records]


def test_edits_on_a_memoryview_into_a_record_set() -> None:
    first = encode_batch([Record(0, 0, None, b"a")], base_timestamp=BASE_TS)
    second = encode_batch(
        [Record(0, 0, None, b"b"), Record(1, 1, None, b"c")], base_timestamp=BASE_TS
    )
    buf = bytearray(first + second)
    view = memoryview(buf)
    set_base_offset(view, len(first), 41)
    set_log_append_time(view, len(first), BASE_TS + 99)
    headers = [h for h, _ in iter_batches(buf)]
    assert [h.base_offset for h in headers] == [0, 41]
    assert headers[1].timestamp_type == LOG_APPEND_TIME
    assert headers[0].timestamp_type == 0


def test_log_append_time_sets_every_record_timestamp() -> None:
    records = [Record(i, i * 7, None, b"v") for i in range(3)]
    buf = bytearray(encode_batch(records, base_timestamp=BASE_TS))
    set_log_append_time(buf, 0, 42)
    header = read_batch_header(buf)
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.max_timestamp == 42
    assert [r.timestamp for r in iter_records(buf)] == [42, 42, 42]
    # and back to CreateTime
    set_max_timestamp(buf, 0, 0, BASE_TS + 14)
    assert [r.timestamp for r in iter_records(buf)] == [BASE_TS, BASE_TS + 7, BASE_TS + 14]


def test_iter_batches_is_zero_copy() -> None:
    batches = [
        encode_batch([Record(0, 0, None, bytes([i]))], base_timestamp=BASE_TS) for i in range(3)
    ]
    buf = b"".join(batches)
    views = list(iter_batches(buf))
    assert [bytes(v) for _, v in views] == batches
    assert all(v.obj is buf for _, v in views)


def test_iter_batches_partial_tail() -> None:
    batch = encode_batch([Record(0, 0, None, b"x" * 50)], base_timestamp=BASE_TS)
    buf = batch + batch[:30]
    assert len(list(iter_batches(buf, allow_partial_tail=True))) == 1
    with pytest.raises(Exception, match="truncated"):
        list(iter_batches(buf))


def test_header_flags() -> None:
    batch = encode_batch(
        [Record(0, 0, None, b"x")],
        producer_id=7,
        producer_epoch=2,
        base_sequence=10,
        is_transactional=True,
        base_timestamp=BASE_TS,
    )
    header = read_batch_header(batch)
    assert header.is_transactional and header.has_producer_id
    assert not header.is_control and not header.has_delete_horizon
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 10)
    assert header.last_offset == 0


def test_encode_rejects_empty_batch() -> None:
    with pytest.raises(ValueError):
        encode_batch([])


def test_large_varints_round_trip() -> None:
    records = [
        Record(0, -(2**63) + BASE_TS + 1, b"k" * 70_000, None, (("ü" * 100, b"v" * 200),)),
        Record(2**31 - 1, 2**40, None, b"", ()),
    ]
    batch = encode_batch(records, base_timestamp=-1)
    assert decode_records(batch) == records
