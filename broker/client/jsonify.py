"""Generated protocol messages to and from JSON, for `raw` and `--json` output.

Field names are the generated snake_case attributes (camelCase is accepted on
input). Bytes and records are written as ``"base64:<data>"``; on input such a
string is decoded as base64 and any other string is taken as UTF-8.
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
import uuid
from typing import Any

from broker.client.session import ClientError
from broker.protocol.json_view import to_jsonable

_BASE64_PREFIX = "base64:"
_INT_TYPES = ("int8", "int16", "int32", "int64", "uint16")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def bytes_to_json(data: bytes | bytearray | memoryview) -> str:
    return _BASE64_PREFIX + base64.b64encode(bytes(data)).decode("ascii")


def to_json(value: Any) -> Any:
    """A message as JSON-able data, bytes as base64."""
    return to_jsonable(value, bytes_to_json)


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def _bytes_from_json(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict) and set(value) == {"base64"}:
        value = _BASE64_PREFIX + str(value["base64"])
    if not isinstance(value, str):
        raise ClientError(f"{where}: expected a string for bytes, got {type(value).__name__}")
    if value.startswith(_BASE64_PREFIX):
        try:
            return base64.b64decode(value[len(_BASE64_PREFIX) :], validate=True)
        except binascii.Error as exc:
            raise ClientError(f"{where}: bad base64: {exc}") from None
    return value.encode("utf-8")


def _scalar_from_json(kafka_type: str, value: Any, where: str) -> Any:
    if kafka_type in _INT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ClientError(f"{where}: expected an integer, got {value!r}")
        return value
    if kafka_type == "bool":
        if not isinstance(value, bool):
            raise ClientError(f"{where}: expected true or false, got {value!r}")
        return value
    if kafka_type == "float64":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ClientError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if kafka_type == "string":
        if value is not None and not isinstance(value, str):
            raise ClientError(f"{where}: expected a string, got {value!r}")
        return value
    if kafka_type == "uuid":
        try:
            return uuid.UUID(str(value))
        except ValueError:
            raise ClientError(f"{where}: expected a UUID, got {value!r}") from None
    if kafka_type in ("bytes", "records"):
        return _bytes_from_json(value, where)
    raise ClientError(f"{where}: unsupported field type {kafka_type}")


def _value_from_json(owner: type, kafka_type: str, value: Any, where: str) -> Any:
    if kafka_type.startswith("[]"):
        if value is None:
            return None
        if not isinstance(value, list):
            raise ClientError(f"{where}: expected a list, got {type(value).__name__}")
        item_type = kafka_type[2:]
        return tuple(
            _value_from_json(owner, item_type, item, f"{where}[{i}]")
            for i, item in enumerate(value)
        )
    nested = getattr(sys.modules[owner.__module__], kafka_type, None)
    if isinstance(nested, type) and hasattr(nested, "FIELDS"):
        return from_json(nested, value, where) if value is not None else None
    return _scalar_from_json(kafka_type, value, where)


def from_json(cls: type, data: Any, where: str | None = None) -> Any:
    """Build a generated message (recursively) from a JSON object; missing
    fields keep their defaults."""
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise ClientError(f"{where}: expected a JSON object, got {type(data).__name__}")
    types = {field[0]: field[1] for field in getattr(cls, "FIELDS", ())}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = _snake(key)
        if name not in types:
            known = ", ".join(types) or "none"
            raise ClientError(f"{where}: unknown field {key!r} (fields: {known})")
        kwargs[name] = _value_from_json(cls, types[name], value, f"{where}.{name}")
    return cls(**kwargs)
