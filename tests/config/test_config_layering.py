"""Configuration is a low layer read through typed settings: no module outside
broker/config/ looks a key up by its string (`config.get_int("num.io.threads")`), and
broker/config/ imports nothing of the broker above it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "broker" / "config"
_GETTER = re.compile(r"^(get_\w+|listener_int|value)$")
_ALLOWED_BELOW = ("broker.config", "broker.errors", "broker.protocol")


def _sources(*roots: str) -> list[Path]:
    return [p for root in roots for p in sorted((REPO / root).rglob("*.py"))]


def key_lookups(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of each `x.get_*("literal", ...)` / `x.listener_int(..., "literal")`."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if not _GETTER.match(node.func.attr):
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and "." in arg.value:
                found.append((node.lineno, arg.value))
    return found


def test_the_scan_finds_a_key_lookup() -> None:
    tree = ast.parse('n = config.get_int("num.io.threads")\nm = c.listener_int(x, "a.b")')
    assert key_lookups(tree) == [(1, "num.io.threads"), (2, "a.b")]
    assert key_lookups(ast.parse('n = headers.get("num.io.threads")')) == []


def test_no_module_outside_config_looks_up_a_key_by_its_string() -> None:
    offenders = []
    for path in _sources("broker", "tools", "bench"):
        text = path.read_text(encoding="utf-8")
        if CONFIG in path.parents or not re.search(r"\.(get_|listener_int)", text):
            continue  # (a cheap filter: parsing the generated codec takes seconds)
        offenders += [
            f"{path.relative_to(REPO)}:{line}: {key}" for line, key in key_lookups(ast.parse(text))
        ]
    assert offenders == [], "read the typed settings groups instead (broker/config/settings.py)"


def test_config_imports_nothing_above_it() -> None:
    imported = []
    for path in sorted(CONFIG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            imported += [
                f"{path.name}: {n}"
                for n in names
                if n.startswith("broker") and not n.startswith(_ALLOWED_BELOW)
            ]
    assert imported == []
