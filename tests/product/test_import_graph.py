"""No import cycle between `broker.*` modules: a module that needs one above it is a design
error the seams (the topology, the config settings, the middleware) exist to prevent.
Imports under TYPE_CHECKING and inside functions count too; the package layers themselves
are checked by `lint-imports` (.importlinter) in `make lint`."""

from __future__ import annotations

import grimp

from tests.import_cycles import strongly_connected


def broker_import_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("broker", cache_dir=None)
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def test_the_cycle_finder_finds_a_cycle_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_broker_module_imports_itself_through_others() -> None:
    assert strongly_connected(broker_import_graph()) == []
