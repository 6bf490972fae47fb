"""Hand-written helpers that the generated codec calls on its slow paths.

The generated code inlines the common single-byte varint case; these functions
handle the multi-byte cases and the skipping of unknown tagged fields, where the
cost of a call does not matter.
"""

from __future__ import annotations

from broker.protocol.errors import DecodeError

__all__ = [
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
    """Read an unsigned varint of at most 5 bytes (Kafka's 32-bit limit)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                raise DecodeError("unsigned varint exceeds 32 bits")
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint is longer than 5 bytes")


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
