"""Hand-written helpers that the generated codec calls on its slow paths.

The generated code inlines the common single-byte varint case; these functions
handle the multi-byte cases and the skipping of unknown tagged fields, where the
cost of a call does not matter.
"""

from __future__ import annotations

import struct

from broker.protocol.errors import DecodeError

__all__ = [
    "ArrayStructs",
    "Buffer",
    "Ext",
    "nbytes",
    "read_uvarint",
    "skip_tagged_fields",
    "write_uvarint",
]

Buffer = bytes | bytearray | memoryview
# Large payloads (records) found while encoding: (offset in the output buffer at
# which the payload belongs, payload). Kept out of the buffer so they are never copied.
Ext = list[tuple[int, Buffer]]


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (Kafka's 32-bit limit).

    The 2- and 3-byte cases are unrolled: they are the lengths of typical record
    batches, which every produce and fetch carries.
    """
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    b = buf[pos + 1]
    if b < 0x80:
        return result | (b << 7), pos + 2
    result |= (b & 0x7F) << 7
    b = buf[pos + 2]
    if b < 0x80:
        return result | (b << 14), pos + 3
    result |= (b & 0x7F) << 14
    b = buf[pos + 3]
    if b < 0x80:
        return result | (b << 21), pos + 4
    result |= (b & 0x7F) << 21
    b = buf[pos + 4]
    if b > 0x0F:
        raise DecodeError("unsigned varint exceeds 32 bits or is longer than 5 bytes")
    return result | (b << 28), pos + 5


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value > 0xFFFFFFFF:
        raise OverflowError(f"unsigned varint out of range: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a tagged-field section whose fields are all unknown to this struct version."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise DecodeError("tagged field exceeds remaining bytes")
    return pos


def nbytes(value: Buffer) -> int:
    """Byte length of a payload; ``len()`` of a cast memoryview counts items, not bytes."""
    return value.nbytes if isinstance(value, memoryview) else len(value)


class ArrayStructs(dict[int, struct.Struct]):
    """Precompiled ``struct.Struct`` for arrays of one fixed-width type, by length.

    Building a format string per array costs more than packing a short array;
    a dict hit is nearly free. Only small lengths are cached, so hostile input
    cannot grow the cache.
    """

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code

    def __missing__(self, n: int) -> struct.Struct:
        s = struct.Struct(f">{n}{self.code}")
        if n <= 256:
            self[n] = s
        return s
