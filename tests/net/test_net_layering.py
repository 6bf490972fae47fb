"""broker.net has no import cycle, counting imports under TYPE_CHECKING too."""

from __future__ import annotations

import ast
from pathlib import Path

import broker.net
from tests.import_cycles import strongly_connected

NET = Path(broker.net.__file__).parent


def net_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("broker.net."):
            found.add(str(node.module))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("broker.net."))
    return found


def test_no_module_of_broker_net_imports_itself_back() -> None:
    graph = {f"broker.net.{p.stem}": net_imports(p) for p in NET.glob("*.py")}
    assert "broker.net.channel_security" not in graph["broker.net.connection"]
    assert strongly_connected(graph) == []
