"""The record-batch codecs Kafka defines, as every client writes and reads them.

A broker decompresses data that strangers sent it, so every decoder here is
bounded: it stops and raises :class:`DecompressionLimitError` once the output
would pass ``max_size`` bytes, instead of letting a few kilobytes of crafted
input allocate gigabytes.

Framing notes, checked against the clients' sources:

* snappy: the Java producer writes snappy-java's "xerial" framing (a 16-byte
  header then blocks of ``int32 length + raw snappy``); librdkafka writes plain
  raw snappy (``rd_kafka_snappy_compress_iov`` in ``rdkafka_msgset_writer.c``).
  librdkafka, kafka-python, aiokafka and snappy-java all sniff the xerial magic
  and fall back to raw snappy, so we read both and write xerial: the framing the
  reference client writes is the one every consumer has to handle.
* lz4: the standard LZ4 frame format with independent blocks (Kafka's
  ``KafkaLZ4BlockInputStream`` cannot follow linked blocks).
* zstd: a standard frame. Streaming writers (Java's ``ZstdOutputStream``,
  librdkafka) may omit the content size, so the size in the frame header is
  only a hint.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

import cramjam

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "CompressionError",
    "CompressionType",
    "DecompressionLimitError",
    "compress",
    "decompress",
]

# Kafka's default max.message.bytes is ~1 MiB and its hard ceiling for a fetch is
# far below this; 64 MiB leaves room for highly compressible batches.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


class CompressionType(enum.IntEnum):
    """The codec id stored in the low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(ValueError):
    """Compressed data that does not decode (or a codec we cannot use)."""


class DecompressionLimitError(CompressionError):
    """The decompressed output would exceed the caller's ``max_size``."""


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_LEN = len(_XERIAL_HEADER)
# snappy-java's default block size; kafka-python and aiokafka use it too.
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
# Kafka's default levels (KIP-390): gzip 6 would also do, 9 matches Java's old default.
_GZIP_LEVEL = 6
_LZ4_LEVEL = 9
_ZSTD_LEVEL = 3


# ---------------------------------------------------------------- compression


def compress(kind: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` the way a Kafka producer would for codec ``kind``."""
    if kind == CompressionType.NONE:
        return bytes(data)
    if kind == CompressionType.GZIP:
        return _gzip_compress(data)
    if kind == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if kind == CompressionType.LZ4:
        return _lz4_compress(data)
    if kind == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise CompressionError(f"unknown compression type {kind!r}")


def _gzip_compress(data: bytes | bytearray | memoryview) -> bytes:
    # wbits 31 = gzip container, which is what Kafka's GZIPOutputStream writes.
    compressor = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    # At least one block, even for empty input: kafka-python and librdkafka only
    # recognise the framing when data follows the 16-byte header.
    for start in range(0, max(len(view), 1), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_compress(data: bytes | bytearray | memoryview) -> bytes:
    # Independent blocks and no content checksum: what Kafka's own
    # KafkaLZ4BlockOutputStream writes and what every reader accepts.
    compressor = cramjam.lz4.Compressor(
        level=_LZ4_LEVEL, content_checksum=False, block_linked=False
    )
    compressor.compress(data)
    return bytes(compressor.finish())


# -------------------------------------------------------------- decompression


def decompress(
    kind: CompressionType,
    data: bytes | bytearray | memoryview,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress ``data`` written with codec ``kind``, to at most ``max_size`` bytes.

    Raises :class:`DecompressionLimitError` past ``max_size`` and
    :class:`CompressionError` on data that does not decode.
    """
    if kind == CompressionType.NONE:
        if len(data) > max_size:
            raise DecompressionLimitError(f"{len(data)} bytes exceed the limit of {max_size}")
        return bytes(data)
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise CompressionError(f"unknown compression type {kind!r}")
    try:
        return decoder(data, max_size)
    except CompressionError:
        raise
    except (cramjam.DecompressionError, zlib.error, ValueError, struct.error) as exc:
        raise CompressionError(f"{CompressionType(kind).name} data does not decode: {exc}") from exc


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    decompressor = zlib.decompressobj(31)
    out = decompressor.decompress(data, max_size + 1)
    if len(out) > max_size:
        raise DecompressionLimitError(f"gzip output exceeds the limit of {max_size} bytes")
    if not decompressor.eof:
        raise CompressionError("gzip stream is truncated")
    return out


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if len(view) >= _XERIAL_HEADER_LEN and view[:8] == _XERIAL_MAGIC:
        return _xerial_decompress(view[_XERIAL_HEADER_LEN:], max_size)
    return _raw_snappy_decompress(view, max_size)


def _raw_snappy_decompress(view: memoryview, max_size: int) -> bytes:
    # Raw snappy starts with its uncompressed length, so the bound is exact.
    size = cramjam.snappy.decompress_raw_len(view)
    if size > max_size:
        raise DecompressionLimitError(f"snappy output of {size} bytes exceeds {max_size}")
    out = bytearray(size)
    written = cramjam.snappy.decompress_raw_into(view, out)
    if written != size:
        raise CompressionError("snappy block is shorter than its declared length")
    return bytes(out)


def _xerial_decompress(view: memoryview, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("xerial snappy block length is truncated")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CompressionError("xerial snappy block runs past the end of the data")
        block = _raw_snappy_decompress(view[pos : pos + length], max_size - total)
        total += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if view[:4] != _LZ4_FRAME_MAGIC:
        raise CompressionError("not an LZ4 frame (bad magic)")
    return _decompress_growing(cramjam.lz4.decompress_into, view, max_size, _lz4_size_hint(view))


def _lz4_size_hint(view: memoryview) -> int | None:
    # FLG bit 3 says an 8-byte little-endian content size follows FLG and BD.
    if len(view) >= 14 and view[4] & 0x08:
        return int.from_bytes(view[6:14], "little")
    return None


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if view[:4] != _ZSTD_FRAME_MAGIC:
        raise CompressionError("not a zstd frame (bad magic)")
    return _decompress_growing(cramjam.zstd.decompress_into, view, max_size, _zstd_size_hint(view))


def _zstd_size_hint(view: memoryview) -> int | None:
    """The Frame_Content_Size of the first frame, if the writer recorded it."""
    if len(view) < 5:
        return None
    descriptor = view[4]
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    dict_id_size = (0, 1, 2, 4)[descriptor & 3]
    fcs_size = (single_segment, 2, 4, 8)[fcs_flag]
    if fcs_size == 0:
        return None
    start = 5 + (0 if single_segment else 1) + dict_id_size
    if len(view) < start + fcs_size:
        return None
    size = int.from_bytes(view[start : start + fcs_size], "little")
    return size + 256 if fcs_size == 2 else size


def _decompress_growing(
    decompress_into: Callable[[memoryview, bytearray], int],
    view: memoryview,
    max_size: int,
    hint: int | None,
) -> bytes:
    """Decompress into a buffer that doubles until the output fits or passes ``max_size``.

    The codec writes into a fixed buffer and fails when it is full, so memory
    stays bounded by ``max_size``; the doubling keeps total work within twice a
    single pass when the frame does not record its size.
    """
    if hint is not None and hint > max_size:
        raise DecompressionLimitError(f"frame declares {hint} bytes, over the limit of {max_size}")
    capacity = min(max_size + 1, hint + 1 if hint is not None else max(64 * 1024, 8 * len(view)))
    while True:
        out = bytearray(capacity)
        try:
            written = decompress_into(view, out)
        except cramjam.DecompressionError as exc:
            if _BUFFER_FULL not in str(exc):
                raise CompressionError(str(exc)) from exc
            if capacity > max_size:
                raise DecompressionLimitError(
                    f"output exceeds the limit of {max_size} bytes"
                ) from exc
            capacity = min(max_size + 1, capacity * 2)
            continue
        if written > max_size:
            raise DecompressionLimitError(f"output exceeds the limit of {max_size} bytes")
        if written < capacity:
            return bytes(out[:written])
        # Filled the buffer exactly: there may be more output, so grow.
        if capacity > max_size:
            raise DecompressionLimitError(f"output exceeds the limit of {max_size} bytes")
        capacity = min(max_size + 1, capacity * 2)


# cramjam's message when the output buffer is full (as opposed to corrupt input).
_BUFFER_FULL = "failed to write whole buffer"

_DECODERS: dict[int, Callable[[bytes | bytearray | memoryview, int], bytes]] = {
    CompressionType.GZIP: _gzip_decompress,
    CompressionType.SNAPPY: _snappy_decompress,
    CompressionType.LZ4: _lz4_decompress,
    CompressionType.ZSTD: _zstd_decompress,
}
