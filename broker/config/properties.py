"""The java.util.Properties text format of server.properties (the subset Kafka uses)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from broker.config.errors import ConfigError

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterator[str]:
    """Join natural lines into logical lines the way java.util.Properties does:
    a line ending in an odd number of backslashes continues on the next line,
    whose leading whitespace is dropped; comment lines never continue."""
    current: list[str] = []
    continuing = False
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_WHITESPACE)
        if not continuing:
            if not line or line[0] in "#!":
                continue
        elif not line:
            # A blank continuation line ends the logical line.
            yield "".join(current)
            current, continuing = [], False
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            current.append(line[:-1])
            continuing = True
        else:
            current.append(line)
            yield "".join(current)
            current, continuing = [], False
    if current:
        yield "".join(current)


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= len(text):
            break  # a lone trailing backslash is dropped, as Java does
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"malformed \\uxxxx escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    escaped = False
    for i, c in enumerate(line):
        if escaped:
            escaped = False
            continue
        if c == "\\":
            escaped = True
        elif c in "=:":
            key_end, value_start, has_separator = i, i + 1, True
            break
        elif c in _WHITESPACE:
            key_end, value_start = i, i + 1
            break
    while value_start < len(line):
        c = line[value_start]
        if c not in _WHITESPACE:
            if not has_separator and c in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse the java.util.Properties text format (the subset Kafka configs use).

    Comments start with '#' or '!'; a key is separated from its value by '=',
    ':' or whitespace; backslash continues a line; `\\t \\n \\r \\f \\uXXXX`
    are escapes and any other escaped character stands for itself. As in Java,
    trailing whitespace of a value is kept here; typed config parsing trims it.
    Later duplicates win.
    """
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        result[_unescape(raw_key)] = _unescape(raw_value)
    return result


def escape_properties_text(text: str, is_key: bool) -> str:
    """The inverse of parse_properties' unescaping, for writing .properties files."""
    out: list[str] = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!" or (c == " " and (is_key or i == 0)):
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else c)
        else:
            out.append(c)
    return "".join(out)
