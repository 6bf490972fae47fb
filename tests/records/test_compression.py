"""Codec framing and the decompression-bomb bound."""

from __future__ import annotations

import contextlib
import os
import struct

import cramjam
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from broker.protocol.compression import (
    CompressionError,
    CompressionType,
    DecompressionLimitError,
    compress,
    decompress,
)

COMPRESSED = [kind for kind in CompressionType if kind != CompressionType.NONE]


class _RawSnappy:
    """What python-snappy offers kafka-python; kafka-python's own xerial code runs on top."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_codec, "snappy", _RawSnappy)


@given(st.binary(max_size=5000) | st.just(b"abc" * 40_000), st.sampled_from(list(CompressionType)))
def test_round_trip(data: bytes, kind: CompressionType) -> None:
    assert decompress(kind, compress(kind, data)) == data


def test_snappy_writes_xerial_framing() -> None:
    out = compress(CompressionType.SNAPPY, b"hello" * 20_000)
    assert out[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", out[8:16]) == (1, 1)


@pytest.mark.usefixtures("kafka_python_snappy")
@pytest.mark.parametrize("size", [0, 1, 32 * 1024, 100_000])
def test_xerial_interop_with_kafka_python(size: int) -> None:
    data = os.urandom(size // 2) + b"z" * (size - size // 2)
    theirs = kafka_codec.snappy_encode(data, xerial_compatible=True)
    assert theirs[:8] == b"\x82SNAPPY\x00"
    assert decompress(CompressionType.SNAPPY, theirs) == data
    assert kafka_codec.snappy_decode(compress(CompressionType.SNAPPY, data)) == data


@pytest.mark.usefixtures("kafka_python_snappy")
def test_raw_snappy_as_librdkafka_writes_it() -> None:
    data = b"librdkafka writes raw snappy " * 500
    raw = kafka_codec.snappy_encode(data, xerial_compatible=False)
    assert raw[:8] != b"\x82SNAPPY\x00"
    assert decompress(CompressionType.SNAPPY, raw) == data


def test_aiokafka_codecs_decode_ours_and_ours_decode_theirs() -> None:
    from aiokafka import codec as aio

    data = b"aiokafka " * 10_000
    pairs = {
        CompressionType.GZIP: (aio.gzip_encode, aio.gzip_decode),
        CompressionType.SNAPPY: (aio.snappy_encode, aio.snappy_decode),
        CompressionType.LZ4: (aio.lz4_encode, aio.lz4_decode),
        CompressionType.ZSTD: (aio.zstd_encode, aio.zstd_decode),
    }
    for kind, (encode, decode) in pairs.items():
        assert decompress(kind, encode(data)) == data, kind
        assert decode(compress(kind, data)) == data, kind


def test_zstd_frame_without_content_size() -> None:
    # Streaming writers (Java's ZstdOutputStream, librdkafka) omit the size.
    data = os.urandom(1000) * 300
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(data)
    frame = bytes(compressor.finish())
    assert decompress(CompressionType.ZSTD, frame) == data
    with pytest.raises(DecompressionLimitError):
        decompress(CompressionType.ZSTD, frame, max_size=len(data) - 1)


def test_lz4_is_framed_with_independent_blocks() -> None:
    out = compress(CompressionType.LZ4, b"x" * 200_000)
    assert out[:4] == b"\x04\x22\x4d\x18"
    flg = out[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence
    assert not flg & 0x04  # no content checksum


@pytest.mark.parametrize("kind", COMPRESSED)
def test_bomb_is_bounded(kind: CompressionType) -> None:
    bomb = compress(kind, bytes(20 * 1024 * 1024))
    assert len(bomb) < 2 * 1024 * 1024
    with pytest.raises(DecompressionLimitError):
        decompress(kind, bomb, max_size=1024 * 1024)


def test_uncompressed_size_is_bounded_too() -> None:
    with pytest.raises(DecompressionLimitError):
        decompress(CompressionType.NONE, b"x" * 11, max_size=10)


@pytest.mark.parametrize("kind", COMPRESSED)
def test_exact_limit_is_allowed(kind: CompressionType) -> None:
    data = b"exact" * 20_000
    assert decompress(kind, compress(kind, data), max_size=len(data)) == data


@pytest.mark.parametrize("kind", COMPRESSED)
@given(garbage=st.binary(max_size=300))
def test_garbage_raises_compression_error(kind: CompressionType, garbage: bytes) -> None:
    with contextlib.suppress(CompressionError):
        decompress(kind, garbage, max_size=1 << 20)


@pytest.mark.parametrize("kind", COMPRESSED)
@given(data=st.data())
def test_truncated_streams_raise_compression_error(
    kind: CompressionType, data: st.DataObject
) -> None:
    payload = compress(kind, b"truncate me " * 3000)
    cut = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
    if kind == CompressionType.SNAPPY:
        # Xerial framing has no end marker: a cut at a block boundary is a complete,
        # shorter stream (the bare 16-byte header is the empty one, which kafka-python
        # writes for empty input), so only cuts inside the header or a block truncate.
        assume(cut not in xerial_block_boundaries(payload))
    with pytest.raises(CompressionError):
        decompress(kind, payload[:cut])


def xerial_block_boundaries(payload: bytes) -> set[int]:
    """Where each xerial block ends (the first after the 16-byte header)."""
    boundaries = {16}
    pos = 16
    while pos < len(payload):
        (length,) = struct.unpack_from(">i", payload, pos)
        pos += 4 + length
        boundaries.add(pos)
    return boundaries


def test_a_bare_xerial_header_is_an_empty_snappy_stream() -> None:
    """kafka-python encodes empty input as the 16-byte header alone."""
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    assert decompress(CompressionType.SNAPPY, header) == b""
