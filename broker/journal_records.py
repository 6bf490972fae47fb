"""The record framing of the coordinators' journals (committed offsets, transactions).

Each record is a JSON object behind a 4-byte length and a 4-byte CRC-32 of its
bytes, so a journal can be appended to without rewriting it and a crash mid-append
leaves a torn tail that reading simply stops at: everything before it is intact.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

_HEADER = struct.Struct(">II")
MAX_RECORD_BYTES = 64 * 1024 * 1024


def encode_record(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


def decode_records(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The valid records at the start of `data`, and how many bytes they span.

    Reading stops at the first record that is cut short, fails its CRC, is not a JSON
    object or claims more than MAX_RECORD_BYTES: that is where a crash tore the file.
    """
    records: list[dict[str, Any]] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        if length > MAX_RECORD_BYTES or end > len(data):
            break
        body = data[pos + _HEADER.size : end]
        if zlib.crc32(body) != crc:
            break
        try:
            record = json.loads(body)
        except ValueError:
            break
        if not isinstance(record, dict):
            break
        records.append(record)
        pos = end
    return records, pos
