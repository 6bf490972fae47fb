"""No import cycle between `broker.*` modules: a module that needs one above it is a design
error the seams (the topology, the config settings, the middleware) exist to prevent.
Imports under TYPE_CHECKING and inside functions count too; the package layers themselves
are checked by `lint-imports` (.importlinter) in `make lint`."""

from __future__ import annotations

from collections.abc import Mapping, Set

import grimp


def strongly_connected(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """Tarjan's algorithm without recursion: the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def broker_import_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("broker", cache_dir=None)
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def test_the_cycle_finder_finds_a_cycle_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_broker_module_imports_itself_through_others() -> None:
    assert strongly_connected(broker_import_graph()) == []
