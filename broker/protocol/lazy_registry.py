"""Lookup tables over the generated messages that import a module only when used.

There are 186 generated modules (about 100k lines); importing them all costs
most of a second in every process — the broker, each `broker client` call,
every Spark worker — while a process uses a handful. The tables keep module
and class *names* and import on first lookup; iterating a whole table imports
everything, which only tests and tools do.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

PACKAGE = "broker.protocol.messages"

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any, Any], None]


def message_module(module: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.{module}")


class LazyTypes(Mapping[int, type]):
    """api key -> message class, from api key -> (module, class name)."""

    def __init__(self, entries: dict[int, tuple[str, str]]) -> None:
        self._entries = entries
        self._loaded: dict[int, type] = {}

    def __getitem__(self, api_key: int) -> type:
        cls = self._loaded.get(api_key)
        if cls is None:
            module, name = self._entries[api_key]
            cls = self._loaded[api_key] = getattr(message_module(module), name)
        return cls

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class LazyCodecs(Mapping[type, tuple[dict[int, Reader], dict[int, Writer]]]):
    """Top-level message class -> (READERS, WRITERS) of its module.

    Only the top-level class of each module is a key: nested structs share a
    module with their message but have no codec of their own.
    """

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = modules  # class name -> module name
        # Every request and response looks its codec up: resolve each class once.
        self._resolved: dict[type, tuple[dict[int, Reader], dict[int, Writer]]] = {}

    def __getitem__(self, cls: type) -> tuple[dict[int, Reader], dict[int, Writer]]:
        found = self._resolved.get(cls)
        if found is not None:
            return found
        module = self._modules.get(getattr(cls, "__name__", ""))
        if module is None or getattr(cls, "__module__", None) != f"{PACKAGE}.{module}":
            raise KeyError(cls)
        loaded = message_module(module)
        if getattr(loaded, cls.__name__) is not cls:
            raise KeyError(cls)
        found = self._resolved[cls] = (loaded.READERS, loaded.WRITERS)
        return found

    def get(self, cls: type, default: Any = None) -> Any:
        found = self._resolved.get(cls)
        if found is not None:
            return found
        try:
            return self[cls]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[type]:
        for name, module in self._modules.items():
            yield getattr(message_module(module), name)

    def __len__(self) -> int:
        return len(self._modules)
