"""Hand-written helpers that the generated codec calls on its slow paths.

The generated code inlines the common single-byte varint case; these functions
handle the multi-byte cases and the skipping of unknown tagged fields, where the
cost of a call does not matter.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable
from typing import Any

from broker.protocol.errors import DecodeError

__all__ = [
    "ArrayStructs",
    "Buffer",
    "Ext",
    "compact_arrays",
    "nbytes",
    "read_uvarint",
    "skip_tagged_fields",
    "struct_eq",
    "struct_ne",
    "uuid_from_bytes",
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


@functools.cache
def compact_arrays(code: str) -> dict[int, Callable[[memoryview, int], tuple[Any, ...]]]:
    """``unpack_from`` for a short compact array, keyed by its length byte (1-127).

    The struct skips the length byte itself (``x``), so the generated code reads a
    whole array of up to 126 numbers with one dict hit and one call, from the
    position of its length byte. Any other byte (0 for null, a multi-byte varint)
    raises ``KeyError``, which sends the generated code to its general path. A
    plain, shared, prefilled dict: the fastest subscript there is.
    """
    return {n: struct.Struct(f">x{n - 1}{code}").unpack_from for n in range(1, 0x80)}


def struct_eq(self: tuple[Any, ...], other: object) -> Any:
    """``==`` of the generated (tuple-based) classes: equal values of the same class only.

    A plain tuple or a message of another class with the same values is not equal;
    other objects get ``NotImplemented`` so that e.g. ``unittest.mock.ANY`` still works.
    """
    if type(other) is type(self):
        return tuple.__eq__(self, other)
    if isinstance(other, tuple):
        return False
    return NotImplemented


def struct_ne(self: tuple[Any, ...], other: object) -> Any:
    if type(other) is type(self):
        return tuple.__ne__(self, other)
    if isinstance(other, tuple):
        return True
    return NotImplemented


_UUID = uuid.UUID
_new_uuid = object.__new__
_set_uuid_int = _UUID.__dict__["int"].__set__
_set_uuid_is_safe = _UUID.__dict__["is_safe"].__set__
_UUID_UNKNOWN = uuid.SafeUUID.unknown
_from_bytes = int.from_bytes


_UUIDS: dict[bytes, uuid.UUID] = {}
_UUIDS_MAX = 4096


def uuid_from_bytes(data: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=data)`` for exactly 16 bytes, without its argument checking.

    ``UUID.__init__`` costs about 0.8 us, most of it validating arguments that the
    decoder already guarantees (``struct`` returns exactly 16 bytes); building it
    directly costs 0.3 us. Topic ids recur in nearly every request, so the (immutable)
    results are also remembered; the memo is bounded (cleared when full), so hostile
    input cannot grow it.
    """
    u = _UUIDS.get(data)
    if u is None:
        u = _new_uuid(_UUID)
        _set_uuid_int(u, _from_bytes(data, "big"))
        _set_uuid_is_safe(u, _UUID_UNKNOWN)
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        _UUIDS[data] = u
    return u
