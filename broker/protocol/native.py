"""Optional native builds of pure modules, used only while they match their source.

`tools/build_native.py` compiles a pure module (e.g. `record_batch/walk.py`) with mypyc into a
sibling `<name>_native` extension that records the SHA-256 of the source it was built
from. A build from an older source is ignored, never run: the pure module always
works, and is what runs wherever no C compiler was at hand.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

DIGEST_NAME = "SOURCE_SHA256"


def source_digest(source: Path) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


def native_name(pure: ModuleType) -> str:
    return f"{pure.__name__}_native"


def load_native(pure: ModuleType) -> ModuleType:
    """The native build of `pure` when one exists for its current source, else `pure`."""
    try:
        native = importlib.import_module(native_name(pure))
    except ImportError:
        return pure
    if pure.__file__ is None or getattr(native, DIGEST_NAME, None) != source_digest(
        Path(pure.__file__)
    ):
        log.warning(
            "ignoring %s: built from another version of %s (make native rebuilds it)",
            native_name(pure),
            pure.__name__,
        )
        return pure
    return native


def is_native(module: ModuleType) -> bool:
    return module.__name__.endswith("_native")
