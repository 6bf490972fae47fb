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


def test_setup_provides_kcat_and_the_java_that_spark_needs() -> None:
    assert _debian_packages() == {"kcat": "kcat", "java": "default-jre-headless"}


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
