"""Generated messages as JSON-able data, for the request log and the client's output.

Messages are tuples underneath (NamedTuple-based), so their `FIELDS` must be
looked at before the generic tuple case; the one thing callers choose is how
bytes and records appear (the request log keeps only their size, the client
prints them).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from typing import Any

import attrs

Buffer = bytes | bytearray | memoryview


def to_jsonable(value: Any, show_bytes: Callable[[Buffer], Any]) -> Any:
    """`value` (a message, struct, list or primitive) as dicts, lists and scalars."""
    if value is None or isinstance(value, bool | str | float):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, int):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return show_bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    fields = getattr(type(value), "FIELDS", None)
    if fields is not None:
        return {field[0]: to_jsonable(getattr(value, field[0]), show_bytes) for field in fields}
    if isinstance(value, list | tuple):
        return [to_jsonable(item, show_bytes) for item in value]
    if attrs.has(type(value)):
        return {
            field.name: to_jsonable(getattr(value, field.name), show_bytes)
            for field in attrs.fields(type(value))
        }
    return str(value)
