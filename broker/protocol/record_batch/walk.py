"""The record walk: the one loop over a batch's records, feeding whatever sink needs it.

Kept apart because it is the one loop whose cost is per record: plain Python that mypyc
can compile (`tools/build_native.py` makes `walk_native` from this file when a C
compiler is present; `native.load_native` uses that build only while it matches this
source). Both builds are tested alike.

`walk_records` checks every record and, when given a `spans` list, appends
`SPAN_FIELDS` ints per record (attributes, timestampDelta, offsetDelta, key start and
length, value start and length, where the headers start, where the record ends; a
length of -1 is null). Sinks (`record_sinks.py`: records, keys, Arrow columns) build what
they need from those positions, so the layout of a record is read here only. Produce
passes no list and builds nothing. Every refusal is a `RecordWalkError`; an IndexError
(a fixed field read past the data) means the same as `TRUNCATED`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    # mypyc's unboxed 64-bit int: positions and lengths in the loop are machine ints
    # rather than tagged Python ints. Only ever an annotation (never evaluated when run as
    # Python, which needs no mypy_extensions); values that can exceed 64 bits (a
    # varlong) stay `int`.
    from mypy_extensions import i64

TRUNCATED = "record data ends before the declared record count"
SPAN_FIELDS = 9
_MIN_RECORD_SIZE: Final = 7  # Final: a constant in the compiled loop, not a global lookup


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


def _span(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """A varint-length-prefixed byte string (-1 = null) that must end by `end`:
    (where its bytes start, its length or -1, the position after it)."""
    raw, pos = _varint(data, pos, 5)
    size = (raw >> 1) ^ -(raw & 1)
    if size < 0:
        if size == -1:
            return pos, -1, pos
        raise RecordWalkError(f"invalid negative length {size}")
    stop = pos + size
    if stop > end:
        raise RecordWalkError(TRUNCATED)
    return pos, size, stop


def read_headers(data: bytes, pos: int, end: int) -> tuple[tuple[str, bytes | None], ...]:
    """The record headers starting at `pos` (already checked by a walk)."""
    raw, pos = _varint(data, pos, 5)
    count = (raw >> 1) ^ -(raw & 1)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        start, size, pos = _span(data, pos, end)
        key = data[start : start + size].decode("utf-8")
        start, size, pos = _span(data, pos, end)
        headers.append((key, None if size < 0 else data[start : start + size]))
    return tuple(headers)


def _check_headers(data: bytes, pos: int, end: int) -> int:
    raw, pos = _varint(data, pos, 5)
    count = (raw >> 1) ^ -(raw & 1)
    if count < 0:
        raise RecordWalkError(f"invalid negative header count {count}")
    if count * 2 > end - pos:
        raise RecordWalkError(TRUNCATED)
    for _ in range(count):
        start, size, pos = _span(data, pos, end)
        if size < 0:
            raise RecordWalkError("invalid negative header key size")
        try:
            data[start:pos].decode("utf-8")
        except UnicodeDecodeError:
            raise RecordWalkError("header key is not valid UTF-8") from None
        pos = _span(data, pos, end)[2]
    return pos


def walk_records(data: bytes, count: int, spans: list[int] | None = None) -> int:
    """Check `count` records at the start of `data`, appending each one's fields to
    `spans` when given; returns where the last one ends.

    Varints of one and two bytes (values below 8192 after zigzag) are read inline.
    Fixed fields may read past a record's end into the next record: the
    `pos != record_end` check refuses that.
    """
    pos: i64 = 0
    end: i64 = len(data)
    b: i64
    length: i64
    record_end: i64
    key_size: i64
    value_size: i64
    # A named i64 counter: `_` would be boxed into a Python int every record.
    _record: i64
    for _record in range(count):
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
        attributes_at = pos
        pos += 1  # attributes: in bounds, since the record is at least six bytes

        # timestampDelta (varlong) and offsetDelta (varint), kept raw (zigzag) and
        # decoded only for a sink: validation pays for their extent alone.
        timestamp_raw = data[pos]
        if timestamp_raw < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            if spans is not None:
                timestamp_raw = (timestamp_raw & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            timestamp_raw, pos = _varint(data, pos, 10)
        offset_raw = data[pos]
        if offset_raw < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            if spans is not None:
                offset_raw = (offset_raw & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            offset_raw, pos = _varint(data, pos, 5)

        # key, then value: -1 is null.
        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = _varint(data, pos, 5)
        key_size = (b >> 1) ^ -(b & 1)
        key_start = pos
        if key_size >= 0:
            pos += key_size
            if pos > record_end:
                raise RecordWalkError(TRUNCATED)
        elif key_size != -1:
            raise RecordWalkError(f"invalid key length {key_size}")

        b = data[pos]
        if b < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            b, pos = _varint(data, pos, 5)
        value_size = (b >> 1) ^ -(b & 1)
        value_start = pos
        if value_size >= 0:
            pos += value_size
            if pos > record_end:
                raise RecordWalkError(TRUNCATED)
        elif value_size != -1:
            raise RecordWalkError(f"invalid value length {value_size}")

        headers_start = pos
        if data[pos] == 0:
            pos += 1
        else:
            pos = _check_headers(data, pos, record_end)
        if pos != record_end:
            raise RecordWalkError(
                f"invalid record size: expected to read {record_end - pos} more bytes in the "
                "record payload"
            )
        if spans is not None:
            spans.extend(
                (
                    data[attributes_at],
                    (timestamp_raw >> 1) ^ -(timestamp_raw & 1),
                    (offset_raw >> 1) ^ -(offset_raw & 1),
                    key_start,
                    key_size,
                    value_start,
                    value_size,
                    headers_start,
                    record_end,
                )
            )
    return pos
