"""The map of the code cannot go stale silently: every path into the tree (`broker/...`,
`tests/...`, `tools/...`, `docs/...`, `bench/...`) that CONTRIBUTING.md, README.md and
docs/design/ name in backticks exists, and so does every bare module name
(`processor.py`) written after such a path on the same line, in one of the directories
named before it (how the map's rows list a package's modules)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAPS = (ROOT / "CONTRIBUTING.md", ROOT / "README.md", *sorted((ROOT / "docs/design").glob("*.md")))
CODE = re.compile(r"`([^`\s]+)`")
BARE_MODULE = re.compile(r"[A-Za-z0-9_*]+\.py")
TREE = ("broker/", "tests/", "tools/", "docs/", "bench/")


def exists(path: str) -> bool:
    """A path or a glob (`broker/handlers/*_txn*.py`) that names something in the tree."""
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def named_paths(text: str) -> Iterator[tuple[int, str]]:
    """(line number, path) for each path into the tree a document names, bare module names
    resolved against the directories named before them on their line; a bare name no
    directory holds is given as `?/name` so that the test reports it."""
    for number, line in enumerate(text.splitlines(), start=1):
        directories: list[str] = []
        for token in CODE.findall(line):
            token = token.rstrip(".,;:")
            if token.startswith(TREE):
                yield number, token
                directory = token if token.endswith("/") else token.rsplit("/", 1)[0] + "/"
                directories.insert(0, directory)
            elif directories and BARE_MODULE.fullmatch(token):
                found = next((d + token for d in directories if exists(d + token)), None)
                yield number, found if found is not None else f"?/{token}"


def missing_paths(document: Path) -> list[str]:
    text = document.read_text(encoding="utf-8")
    return [
        f"{document.relative_to(ROOT)}:{number}: {path}"
        for number, path in named_paths(text)
        if not exists(path)
    ]


def test_every_broker_path_the_map_and_the_design_notes_name_exists() -> None:
    missing = [entry for document in MAPS for entry in missing_paths(document)]
    assert missing == []


def test_the_map_names_every_broker_package() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = {path for _, path in named_paths(text)}
    packages = {
        str(p.parent.relative_to(ROOT)) + "/" for p in (ROOT / "broker").rglob("__init__.py")
    }
    assert sorted(p for p in packages if not any(n.startswith(p) for n in named)) == []


def test_stale_and_misplaced_names_are_reported() -> None:
    text = (
        "`broker/net/`: `processor.py`, `no_such_module.py`\n"
        "`broker/config.py` and `broker/cluster/peer_server.py`\n"
        "`broker/handlers/*_txn*.py`, `broker/protocol/record_batch/`: `layout.py`\n"
    )
    assert [path for _, path in named_paths(text) if not exists(path)] == [
        "?/no_such_module.py",
        "broker/config.py",
        "broker/cluster/peer_server.py",
    ]
