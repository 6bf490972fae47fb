"""The cluster is an implementation of the topology seam, not something patched in: only
`broker/cluster/` itself and the composition root (`broker/__main__.py`) import it, and
the seam imports nothing above protocol, errors and config. Imports inside functions
and under TYPE_CHECKING count too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import broker

BROKER = Path(broker.__file__).parent
COMPOSITION_ROOT = BROKER / "__main__.py"
CLUSTER = BROKER / "cluster"
TOPOLOGY_MAY_IMPORT = ("broker.protocol", "broker.errors", "broker.config")


def imported_modules(path: Path) -> Iterator[str]:
    """Every module an import statement of the file names (`from a import b` gives
    `a` and `a.b`, since `b` may be a module)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def importers_of(target: str, paths: Iterator[Path]) -> list[str]:
    # Only files that name the module's last part can import it (`from broker import
    # cluster` included): the large generated codec modules are not parsed.
    last = target.rsplit(".", 1)[-1]
    return sorted(
        str(path.relative_to(BROKER.parent))
        for path in paths
        if last in path.read_text()
        and any(m == target or m.startswith(target + ".") for m in imported_modules(path))
    )


def test_no_module_below_the_composition_root_imports_the_cluster() -> None:
    outside = (
        p for p in BROKER.rglob("*.py") if p != COMPOSITION_ROOT and not p.is_relative_to(CLUSTER)
    )
    assert importers_of("broker.cluster", outside) == []


def test_the_server_and_the_cluster_do_not_import_each_other() -> None:
    assert importers_of("broker.cluster", iter([BROKER / "server.py"])) == []
    assert importers_of("broker.server", CLUSTER.rglob("*.py")) == []


def test_the_topology_seam_imports_only_protocol_errors_and_config() -> None:
    found = [
        m
        for m in imported_modules(BROKER / "topology.py")
        if m.startswith("broker") and not m.startswith(TOPOLOGY_MAY_IMPORT)
    ]
    assert found == []


def test_the_scan_sees_imports_inside_functions_and_type_checking(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from broker.cluster.member import ClusterMember\n"
        "def f() -> None:\n    import broker.cluster.placement\n"
    )
    assert {"broker.cluster.member", "broker.cluster.placement"} <= set(imported_modules(sample))
