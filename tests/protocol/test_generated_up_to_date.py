"""The committed generated code is exactly what the generator produces now."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "broker" / "protocol" / "messages"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_protocol", REPO / "tools" / "generate_protocol.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    gen = _generator()
    spec_dir = Path(os.environ.get("KAFKA_PROTOCOL_DIR", gen.DEFAULT_SPEC_DIR))
    assert spec_dir.is_dir(), f"Kafka JSON definitions not found at {spec_dir}"
    gen.main(["--out", str(tmp_path)])
    fresh = {p.name: p.read_text() for p in tmp_path.glob("*.py")}
    committed = {p.name: p.read_text() for p in OUT.glob("*.py")}
    assert sorted(fresh) == sorted(committed), "generated file set differs; run make generate"
    stale = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not stale, f"stale generated files (run make generate): {stale}"


def test_the_codec_is_generated_from_definitions_inside_the_repository() -> None:
    """A fresh clone has nothing beside it: the definitions must travel with the code."""
    gen = _generator()
    spec_dir = Path(gen.DEFAULT_SPEC_DIR).resolve()
    assert spec_dir.is_relative_to(REPO), spec_dir
    assert len(list(spec_dir.glob("*Request.json"))) >= 80
    vendored = spec_dir.parent
    assert "Apache License" in (vendored / "LICENSE").read_text()
    assert "Apache Kafka" in (vendored / "NOTICE").read_text()
