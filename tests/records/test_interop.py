"""Batches from real client libraries decode with ours, and ours decode with theirs.

kafka-python ships the batch framing but leaves snappy/lz4/zstd to optional
packages that are not installed here; the fixture plugs cramjam primitives in
where python-snappy / python-lz4 / zstandard would sit, so kafka-python's own
batch code (and its own xerial framing) still runs. aiokafka's C-extension
builder uses cramjam natively.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka import codec as kafka_codec
from kafka.record import default_records as kp_records

from broker.protocol.compression import CompressionType
from broker.protocol.records import (
    Record,
    decode_records,
    encode_batch,
    iter_records,
    read_batch_header,
    validate_record_set,
)

BASE_TS = 1_700_000_000_000
pytestmark = pytest.mark.interop


class _RawSnappy:
    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


def _lz4_frame(data: bytes) -> bytes:
    # python-lz4's lz4.frame.compress(..., block_linked=False), as kafka-python calls it.
    compressor = cramjam.lz4.Compressor(block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


@pytest.fixture(autouse=True)
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(kafka_codec, "snappy", _RawSnappy)
    monkeypatch.setattr(kafka_codec, "lz4", object())
    monkeypatch.setattr(kafka_codec, "zstd", object())
    monkeypatch.setattr(kp_records, "lz4_encode", _lz4_frame)
    monkeypatch.setattr(kp_records, "lz4_decode", lambda d: bytes(cramjam.lz4.decompress(d)))
    monkeypatch.setattr(kp_records, "zstd_encode", lambda d: bytes(cramjam.zstd.compress(d)))
    monkeypatch.setattr(kp_records, "zstd_decode", lambda d: bytes(cramjam.zstd.decompress(d)))
    yield


def _sample() -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """(offset, timestamp, key, value, headers): keys, null keys/values, headers, and
    enough repetition that every codec actually compresses."""
    rows = []
    for i in range(40):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else (b"value-%d-" % i) * 10
        headers: list[tuple[str, bytes | None]] = (
            [("trace", b"abc"), ("empty", b""), ("null", None)] if i % 3 == 0 else []
        )
        rows.append((i, BASE_TS + i * 3, key, value, headers))
    return rows


def _expected(rows: list[Any]) -> list[Record]:
    return [
        Record(offset, ts - BASE_TS, key, value, tuple(headers))
        for offset, ts, key, value, headers in rows
    ]


def _build(builder_cls: Callable[..., Any], kind: CompressionType, rows: list[Any]) -> bytes:
    builder = builder_cls(
        magic=2,
        compression_type=int(kind),
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, ts, key, value, headers in rows:
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


BUILDERS = {"kafka-python": kp_records.DefaultRecordBatchBuilder, "aiokafka": AioBuilder}
READERS = {"kafka-python": kp_records.DefaultRecordBatch, "aiokafka": AioBatch}


@pytest.mark.parametrize("client", list(BUILDERS))
@pytest.mark.parametrize("kind", list(CompressionType))
def test_client_batches_validate_and_decode(client: str, kind: CompressionType) -> None:
    rows = _sample()
    batch = _build(BUILDERS[client], kind, rows)
    header = read_batch_header(batch)
    assert header.compression == kind  # the client really compressed it
    assert validate_record_set(batch) == [header]
    assert decode_records(batch) == _expected(rows)
    assert [(r.offset, r.timestamp) for r in iter_records(batch)] == [
        (offset, ts) for offset, ts, *_ in rows
    ]


@pytest.mark.parametrize("client", list(BUILDERS))
def test_idempotent_client_batch(client: str) -> None:
    builder = BUILDERS[client](
        magic=2,
        compression_type=0,
        is_transactional=1,
        producer_id=1234,
        producer_epoch=5,
        base_sequence=77,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=BASE_TS, key=None, value=b"tx", headers=[])
    batch = bytes(builder.build())
    header = validate_record_set(batch)[0]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 77)
    assert header.is_transactional


@pytest.mark.parametrize("client", list(READERS))
@pytest.mark.parametrize("kind", list(CompressionType))
def test_our_batches_decode_with_client_readers(client: str, kind: CompressionType) -> None:
    rows = _sample()
    batch = encode_batch(
        _expected(rows),
        compression=kind,
        base_timestamp=BASE_TS,
        base_offset=1000,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
    )
    reader = READERS[client](bytearray(batch))
    assert reader.validate_crc()
    assert reader.compression_type == int(kind)
    assert reader.base_offset == 1000
    got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in reader]
    want = [(1000 + o, ts, k, v, h) for o, ts, k, v, h in rows]
    assert got == want
