"""The record walk Produce validation runs over every record: one pass over bytes.

Kept apart from `records.py` because it is the one loop whose cost is per record: it
is plain Python that mypyc can compile (`tools/build_native.py` makes
`record_walk_native` from this file when a C compiler is present; `records.py` uses
that build only while it matches this source). Both builds are tested alike.

It reads exactly what `records._decode_all` reads, in the same order, and refuses the
same inputs, but keeps nothing: the deltas' varints are stepped over, keys and values
skipped by length. Header keys are still decoded, since a key that is not UTF-8 makes
the record unreadable. Every refusal is a `RecordWalkError`; an IndexError (a fixed
field read past the data) means the same as `TRUNCATED`.
"""

from __future__ import annotations

TRUNCATED = "record data ends before the declared record count"
_MIN_RECORD_SIZE = 7


class RecordWalkError(Exception):
    """Malformed record data; the caller answers CORRUPT_MESSAGE with the message."""


def _varint(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """A raw (still zigzag-encoded) varint of up to `max_bytes` bytes, and the
    position after it: 5 bytes for an int32, 10 for an int64."""
    result = 0
    shift = 0
    end = len(data)
    for _ in range(max_bytes):
        if pos >= end:
            raise RecordWalkError(TRUNCATED)
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise RecordWalkError(f"varint is longer than {max_bytes} bytes")


def _skip_bytes(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Step over a varint-length-prefixed byte string (-1 = null) that must end by
    `end`; returns where its bytes start (-1 when null) and the position after it."""
    raw, pos = _varint(data, pos, 5)
    size = (raw >> 1) ^ -(raw & 1)
    if size < 0:
        if size == -1:
            return -1, pos
        raise RecordWalkError(f"invalid negative length {size}")
    stop = pos + size
    if stop > end:
        raise RecordWalkError(TRUNCATED)
    return pos, stop


def _skip_headers(data: bytes, pos: int, end: int) -> int:
    raw, pos = _varint(data, pos, 5)
    count = (raw >> 1) ^ -(raw & 1)
    if count < 0:
        raise RecordWalkError(f"invalid negative header count {count}")
    if count * 2 > end - pos:
        raise RecordWalkError(TRUNCATED)
    for _ in range(count):
        key_start, pos = _skip_bytes(data, pos, end)
        if key_start < 0:
            raise RecordWalkError("invalid negative header key size")
        try:
            data[key_start:pos].decode("utf-8")
        except UnicodeDecodeError:
            raise RecordWalkError("header key is not valid UTF-8") from None
        pos = _skip_bytes(data, pos, end)[1]
    return pos


def walk_records(data: bytes, count: int) -> int:
    """Check `count` records at the start of `data`; returns where the last one ends."""
    pos = 0
    end = len(data)
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = _varint(data, pos, 5)
        length = (b >> 1) ^ -(b & 1)
        record_end = pos + length
        if length < _MIN_RECORD_SIZE - 1 or record_end > end:
            raise RecordWalkError(f"invalid record length {length} at position {pos}")
        pos += 1  # attributes: in bounds, since the record is at least six bytes

        # timestampDelta (varlong) and offsetDelta (varint): only their extent matters.
        if data[pos] < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            pos += 2
        else:
            pos = _varint(data, pos, 10)[1]
        if data[pos] < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            pos += 2
        else:
            pos = _varint(data, pos, 5)[1]

        # key, then value: skipped by length (-1 is null).
        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = _varint(data, pos, 5)
        size = (b >> 1) ^ -(b & 1)
        if size >= 0:
            pos += size
            if pos > record_end:
                raise RecordWalkError(TRUNCATED)
        elif size != -1:
            raise RecordWalkError(f"invalid key length {size}")

        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = _varint(data, pos, 5)
        size = (b >> 1) ^ -(b & 1)
        if size >= 0:
            pos += size
            if pos > record_end:
                raise RecordWalkError(TRUNCATED)
        elif size != -1:
            raise RecordWalkError(f"invalid value length {size}")

        if data[pos] == 0:
            pos += 1
        else:
            pos = _skip_headers(data, pos, record_end)
        if pos != record_end:
            raise RecordWalkError(
                f"invalid record size: expected to read {record_end - pos} more bytes in the "
                "record payload"
            )
    return pos
