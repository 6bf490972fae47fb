"""How `consume` prints a record: kcat's `-f` format or one JSON object per line.

Format tokens (kcat's): %t topic, %p partition, %o offset, %k key, %s value
(NULL for a null value: a tombstone), %T timestamp (ms), %h headers (k=v,k=v), %K key length, %S value length
(-1 for null), %% a percent sign; escapes \\n, \\t, \\r, \\\\.
"""

from __future__ import annotations

import base64
import json
import re

from broker.protocol.records import DecodedRecord

NULL_VALUE = b"NULL"
"""What %s prints for a null value (a tombstone), as kcat -Z does, so that it stands
out from an empty value; --json prints null."""
_TOKEN = re.compile(r"%[tpokSsTKh%]|\\[ntr\\]")
_ESCAPES = {"\\n": b"\n", "\\t": b"\t", "\\r": b"\r", "\\\\": b"\\"}


def unescape(text: str) -> bytes:
    """kcat's escapes in a delimiter or format: \\n, \\t, \\r and \\\\."""
    return re.sub(r"\\[ntr\\]", lambda m: _ESCAPES[m.group()].decode(), text).encode()


def _length(data: bytes | None) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


def _headers(record: DecodedRecord) -> bytes:
    return b",".join(
        key.encode() + b"=" + (value if value is not None else b"") for key, value in record.headers
    )


def compile_format(fmt: str) -> list[str | bytes]:
    """Split a format into literal bytes and token strings."""
    parts: list[str | bytes] = []
    pos = 0
    for match in _TOKEN.finditer(fmt):
        if match.start() > pos:
            parts.append(fmt[pos : match.start()].encode())
        token = match.group()
        parts.append(_ESCAPES.get(token, token))
        pos = match.end()
    if pos < len(fmt):
        parts.append(fmt[pos:].encode())
    return parts


def render(parts: list[str | bytes], topic: str, partition: int, record: DecodedRecord) -> bytes:
    out = bytearray()
    for part in parts:
        if isinstance(part, bytes):
            out += part
        elif part == "%s":
            out += NULL_VALUE if record.value is None else record.value
        elif part == "%k":
            out += record.key or b""
        elif part == "%t":
            out += topic.encode()
        elif part == "%p":
            out += str(partition).encode()
        elif part == "%o":
            out += str(record.offset).encode()
        elif part == "%T":
            out += str(record.timestamp).encode()
        elif part == "%h":
            out += _headers(record)
        elif part == "%K":
            out += _length(record.key)
        elif part == "%S":
            out += _length(record.value)
        else:  # "%%"
            out += b"%"
    return bytes(out)


def _text(data: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text when it decodes, else {"base64": ...}."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def render_json(topic: str, partition: int, record: DecodedRecord) -> bytes:
    entry = {
        "topic": topic,
        "partition": partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _text(record.key),
        "value": _text(record.value),
        "headers": [{"key": k, "value": _text(v)} for k, v in record.headers],
    }
    return json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n"
