"""Hypothesis strategies derived from the generated classes' ``FIELDS`` metadata.

Deriving them from the generated metadata (instead of the JSON) means the tests
exercise exactly what the generator believed about each field, so a wrong
belief shows up as a round-trip failure rather than being reproduced here.
"""

from __future__ import annotations

import importlib
import sys
from functools import cache
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from broker.protocol.messages import registry

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
MAX_ARRAY = 3


def in_versions(spec: str, version: int) -> bool:
    if spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= version <= int(hi)
    return version == int(spec)


def all_top_level() -> list[type]:
    return sorted(registry.CODECS, key=lambda c: c.__name__)


def all_pairs() -> list[tuple[type, int]]:
    pairs = []
    for cls in all_top_level():
        for v in sorted(registry.CODECS[cls][0]):
            pairs.append((cls, v))
    return pairs


def module_of(cls: type) -> ModuleType:
    return sys.modules[cls.__module__]


def _primitive(ktype: str) -> st.SearchStrategy[Any]:
    if ktype in INT_RANGES:
        lo, hi = INT_RANGES[ktype]
        return st.integers(lo, hi)
    if ktype == "bool":
        return st.booleans()
    if ktype == "float64":
        return st.floats(allow_nan=False)
    if ktype == "string":
        return st.text(max_size=12)
    if ktype == "uuid":
        return st.uuids()
    if ktype in ("bytes", "records"):
        return st.binary(max_size=16)
    raise AssertionError(ktype)


@cache
def struct_strategy(cls: type, version: int) -> st.SearchStrategy[Any]:
    """Random valid instances of ``cls`` for ``version``; absent fields keep defaults."""
    module = module_of(cls)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for attr, ktype, versions, nullable, _tagged, _tag in cls.FIELDS:  # type: ignore[attr-defined]
        if not in_versions(versions, version):
            continue
        is_array = ktype.startswith("[]")
        elem = ktype[2:] if is_array else ktype
        if elem in INT_RANGES or elem in ("bool", "float64", "string", "uuid", "bytes", "records"):
            inner = _primitive(elem)
        else:

            def nested(e: str = elem) -> st.SearchStrategy[Any]:
                return struct_strategy(getattr(module, e), version)

            inner = st.deferred(nested)
        s = st.lists(inner, max_size=MAX_ARRAY).map(tuple) if is_array else inner
        if in_versions(nullable, version):
            s = st.none() | s
        kwargs[attr] = s
    # Not st.builds: it infers values for NamedTuple fields that have defaults, which
    # would fill fields absent from ``version`` (and lost on the wire).
    return st.fixed_dictionaries(kwargs).map(lambda kw: cls(**kw))


def load(name: str) -> ModuleType:
    return importlib.import_module(f"broker.protocol.messages.{name}")
