"""The set-up installs what the tests need from Debian when it is missing, and nothing else."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _debian_packages() -> dict[str, str]:
    match = re.search(r"^DEBIAN_PACKAGES := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert match
    return dict(entry.split(":", 1) for entry in match.group(1).split())


def test_setup_provides_kcat_java_zookeeper_chromium_and_ip_from_debian() -> None:
    """kcat for the interop tests, the Java that Spark and ZooKeeper run on, ZooKeeper's
    server jars for the coordination fixture, the browser the console test drives, and
    `ip` for the network namespaces of the cut-off fault test."""
    assert _debian_packages() == {
        "kcat": "kcat",
        "java": "default-jre-headless",
        "/usr/share/java/zookeeper.jar": "zookeeper",
        "chromium": "chromium",
        "ip": "iproute2",
    }


def test_only_packages_whose_command_is_missing_are_installed(tmp_path: Path) -> None:
    """apt-get is stood in for by a script that records its arguments."""
    log = tmp_path / "apt.log"
    for tool in ("apt-get", "sudo"):
        stub = tmp_path / tool
        stub.write_text(f'#!/bin/sh\n[ "$1" = apt-get ] && shift\necho "$@" >> {log}\n')
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    packages = "sh:should-not-install no-such-command-here:wanted-package"
    result = subprocess.run(
        ["make", "-s", "system-packages", f"DEBIAN_PACKAGES={packages}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "update -qq"
    assert calls[1].split()[-1] == "wanted-package"
    assert "should-not-install" not in log.read_text()


# Import names that differ from the distribution names pyproject.toml lists.
_DISTRIBUTION_OF = {
    "prometheus_client": "prometheus-client",
    "trio_util": "trio-util",
    "typing_extensions": "typing-extensions",
}


def _third_party_imports(package_dir: Path) -> set[str]:
    import ast
    import sys

    def type_checking_only(tree: ast.Module) -> set[ast.AST]:
        """Nodes under `if TYPE_CHECKING:`: never imported when the broker runs."""
        guarded: set[ast.AST] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                for statement in node.body:
                    guarded.update(ast.walk(statement))
        return guarded

    names: set[str] = set()
    for path in package_dir.rglob("*.py"):
        tree = ast.parse(path.read_text())
        guarded = type_checking_only(tree)
        for node in ast.walk(tree):
            if node in guarded:
                continue
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "broker"}


def _declared(extra: str | None = None) -> set[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_broker_imports_only_what_its_image_installs() -> None:
    """The broker image installs the main dependencies alone (docker/broker.lock): an
    import only the dev extra provides passes every test and fails in the container."""
    imported = _third_party_imports(ROOT / "broker") - _third_party_imports(
        ROOT / "broker" / "pipeline"
    )
    needed = {_DISTRIBUTION_OF.get(name, name) for name in imported}
    assert needed <= _declared(), sorted(needed - _declared())
    pipeline = {
        _DISTRIBUTION_OF.get(n, n) for n in _third_party_imports(ROOT / "broker" / "pipeline")
    }
    assert pipeline <= _declared() | _declared("pipeline"), sorted(
        pipeline - _declared() - _declared("pipeline")
    )
    broker_lock = (ROOT / "docker" / "broker.lock").read_text()
    for distribution in needed:
        assert re.search(rf"^{re.escape(distribution)}==", broker_lock, re.M), distribution
