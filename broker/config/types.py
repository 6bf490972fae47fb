"""The one type vocabulary of configuration: Kafka's ConfigType, with how each type's
values are read from and written to strings.

Broker keys and topic keys both use it, and DescribeConfigs reports it as it is (the
enum's numbers are Kafka's DescribeConfigsResponse.ConfigType), so a key's type is
written down once and never translated between two vocabularies.
"""

from __future__ import annotations

import enum
import math

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


class ConfigType(enum.IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9

    @property
    def label(self) -> str:
        """The short name the configuration reference prints (`int`, `bool`, ...)."""
        return _LABELS[self]


_LABELS = {
    ConfigType.UNKNOWN: "unknown",
    ConfigType.BOOLEAN: "bool",
    ConfigType.STRING: "string",
    ConfigType.INT: "int",
    ConfigType.SHORT: "short",
    ConfigType.LONG: "long",
    ConfigType.DOUBLE: "double",
    ConfigType.LIST: "list",
    ConfigType.CLASS: "class",
    ConfigType.PASSWORD: "password",
}


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4


def split_list(value: str) -> list[str]:
    """Kafka's list parsing: comma-separated, entries trimmed, empty entries dropped."""
    return [part.strip() for part in value.split(",") if part.strip()]


_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


def parse_value(type_: ConfigType, raw: str) -> object:
    """A string value as `type_`, the way Kafka's ConfigDef.parseType reads it
    (surrounding whitespace is insignificant). ValueError says why not, without a key."""
    text = raw.strip()
    if type_ in _RANGES:
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        low, high = _RANGES[type_]
        if not low <= number <= high:
            raise ValueError(f"{text} does not fit in a 32/64-bit {type_.label}")
        return number
    if type_ == ConfigType.DOUBLE:
        try:
            real = float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if math.isnan(real):
            raise ValueError(f"expected a number, got {raw!r}")
        return real
    if type_ == ConfigType.BOOLEAN:
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"expected true or false, got {raw!r}")
        return lowered == "true"
    if type_ == ConfigType.LIST:
        return split_list(text)
    return text


def render_value(value: object) -> str:
    """A typed value as the string that parses back to it (None is Kafka's "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
