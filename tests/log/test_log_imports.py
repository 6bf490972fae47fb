"""broker.log and broker.protocol have no import cycle, TYPE_CHECKING imports included.

Importing `broker.log.x` runs `broker/log/__init__.py` first, so a package `__init__`
that re-exports its modules makes every module of the package depend on all the others;
this counts that edge as well as every written import.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import broker
from tests.import_cycles import strongly_connected

ROOT = Path(broker.__file__).parent


def _module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names[name] = path
    return names


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        for target in targets:
            parts = target.split(".")
            # the module itself and every package above it run on import
            found.update(
                ".".join(parts[:i])
                for i in range(1, len(parts) + 1)
                if ".".join(parts[:i]) in known
            )
    found.discard(name)
    return found


@functools.cache
def _broker_graph() -> dict[str, set[str]]:
    known = _module_names()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _cycle_members(prefix: str) -> set[str]:
    graph = {
        name: {d for d in deps if d.startswith(prefix)}
        for name, deps in _broker_graph().items()
        if name.startswith(prefix)
    }
    return {member for cycle in strongly_connected(graph) for member in cycle}


@pytest.mark.parametrize("package", ["broker.log", "broker.protocol"])
def test_the_package_has_no_import_cycle(package: str) -> None:
    assert _cycle_members(package) == set()


def test_the_check_sees_a_cycle_through_a_re_exporting_init(tmp_path: Path) -> None:
    known = {"broker.log": tmp_path / "init.py", "broker.log.a": tmp_path / "a.py"}
    known["broker.log"].write_text("from broker.log.a import A\n")
    known["broker.log.a"].write_text("from broker.log.results import R\n")
    assert "broker.log" in _imports("broker.log.a", known["broker.log.a"], known)
    assert "broker.log.a" in _imports("broker.log", known["broker.log"], known)
