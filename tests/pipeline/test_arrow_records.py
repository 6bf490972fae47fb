"""Record batches to Arrow, checked against records.iter_records (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from broker.pipeline.arrow_records import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    CorruptRecordsError,
    RecordColumns,
    record_set_to_arrow,
)
from broker.protocol.compression import CompressionType
from broker.protocol.records import (
    LOG_APPEND_TIME,
    Record,
    encode_batch,
    iter_batches,
    iter_records,
)


def _record_set(compression: CompressionType = CompressionType.NONE) -> bytes:
    batches = []
    offset = 0
    for size in (1, 70, 300):
        records = [
            Record(
                i,
                i * 3,
                None if i % 7 == 0 else b"key-%d" % i,
                None if i % 11 == 5 else bytes([i % 256]) * (i * 3),
                (("h", b"x"), ("n", None)) if i % 5 == 0 else (),
            )
            for i in range(size)
        ]
        batches.append(
            encode_batch(
                records,
                base_offset=offset,
                compression=compression,
                base_timestamp=1_700_000_000_000,
            )
        )
        offset += size
    return b"".join(batches)


def _reference(data: bytes) -> list[object]:
    return [r for header, batch in iter_batches(data) for r in iter_records(batch, header)]


@pytest.mark.parametrize("compression", list(CompressionType))
def test_arrow_columns_match_the_record_decoder(compression: CompressionType) -> None:
    data = _record_set(compression)
    rb = record_set_to_arrow(data, "t", 3, include_headers=True)
    expected = _reference(data)
    assert rb.schema == ARROW_SCHEMA_WITH_HEADERS
    assert rb.column("offset").to_pylist() == [r.offset for r in expected]  # type: ignore[attr-defined]
    assert rb.column("key").to_pylist() == [r.key for r in expected]  # type: ignore[attr-defined]
    assert rb.column("value").to_pylist() == [r.value for r in expected]  # type: ignore[attr-defined]
    micros = rb.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [r.timestamp * 1000 for r in expected]  # type: ignore[attr-defined]
    headers = rb.column("headers").to_pylist()
    assert headers == [
        [{"key": k, "value": v} for k, v in r.headers] if r.headers else None  # type: ignore[attr-defined]
        for r in expected
    ]
    assert set(rb.column("topic").to_pylist()) == {"t"}
    assert set(rb.column("partition").to_pylist()) == {3}


def test_schema_is_sparks_exactly() -> None:
    assert ARROW_SCHEMA.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert ARROW_SCHEMA.field("partition").type == pa.int32()
    assert ARROW_SCHEMA.field("timestampType").type == pa.int32()
    assert ARROW_SCHEMA_WITH_HEADERS.field("headers").type.value_field.name == "element"
    assert record_set_to_arrow(_record_set(), "t", 0).schema == ARROW_SCHEMA


def test_only_offsets_inside_the_range_are_kept() -> None:
    rb = record_set_to_arrow(_record_set(), "t", 0, start=50, end=100)
    assert rb.column("offset").to_pylist() == list(range(50, 100))


def test_log_append_time_batches_use_the_batch_timestamp() -> None:
    batch = encode_batch(
        [Record(0, 5, None, b"a"), Record(1, 9, None, b"b")],
        base_timestamp=1000,
        timestamp_type=LOG_APPEND_TIME,
    )
    rb = record_set_to_arrow(batch, "t", 0)
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [1_009_000, 1_009_000]
    assert rb.column("timestampType").to_pylist() == [1, 1]


def test_control_batches_are_skipped() -> None:
    control = encode_batch([Record(0, 0, b"\x00\x00\x00\x00", b"")], is_control=True)
    data = encode_batch([Record(0, 0, None, b"x")], base_offset=1)
    rb = record_set_to_arrow(control + data, "t", 0)
    assert rb.column("offset").to_pylist() == [1]


def test_a_partial_batch_at_the_tail_is_ignored() -> None:
    data = _record_set()
    rb = record_set_to_arrow(data[:-10], "t", 0)
    assert rb.num_rows == 71


def test_corrupt_records_raise_a_clear_error() -> None:
    data = bytearray(encode_batch([Record(0, 0, None, b"x" * 50)]))
    data[-60] ^= 0xFF
    with pytest.raises(CorruptRecordsError):
        record_set_to_arrow(bytes(data), "t", 0)


def test_decoding_in_slices_yields_the_same_rows_and_the_next_fetch_offset() -> None:
    data = _record_set(CompressionType.LZ4)
    columns = RecordColumns("t", 0, include_headers=True)
    decoding = columns.decode(data, 10, 300, rows_per_batch=50)
    slices = []
    while True:
        try:
            slices.append(next(decoding))
        except StopIteration as done:
            next_offset = done.value
            break
    slices.append(columns.take())
    # Whole Kafka batches are decoded before a slice is cut: 71 rows, then the last batch.
    assert [rb.num_rows for rb in slices] == [61, 229, 0]
    whole = record_set_to_arrow(data, "t", 0, start=10, end=300, include_headers=True)
    assert pa.Table.from_batches(slices).equals(pa.Table.from_batches([whole]))
    assert next_offset == 371
