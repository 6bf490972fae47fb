"""`broker serve` with a bad config, as an operator meets it: one line, exit code 2.

Whichever process finds the error (the single broker, a cluster's supervisor, or a
process of a cluster started on its own) reports it as one line naming the key (and
the file, for a file-valued key), with no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def serve(*arguments: str, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`broker serve OPTIONS --override ARGUMENT...`, to its end."""
    overrides = [item for argument in arguments for item in ("--override", argument)]
    return subprocess.run(
        [sys.executable, "-m", "broker", "serve", *options, *overrides],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " INFO " not in line]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            (
                "process.count=1",
                "listeners=SSL://127.0.0.1:0",
                "ssl.keystore.location=/nonexistent.pem",
            ),
            "ssl.keystore.location: cannot load the key store /nonexistent.pem",
        ),
        (
            (
                "process.count=2",
                "listeners=SSL://127.0.0.1:0",
                "ssl.keystore.location=/nonexistent.pem",
            ),
            "ssl.keystore.location: cannot load the key store /nonexistent.pem",
        ),
        (("process.count=2", "log.dirs={file}"), "log.dirs: {file} is a file, not a directory"),
        (("process.count=1", "log.retention.ms=abc"), "log.retention.ms: expected an integer"),
    ],
    ids=["missing-key-store", "missing-key-store-cluster", "log-dir-is-a-file", "not-an-integer"],
)
def test_a_config_error_is_one_line_naming_the_key_and_exit_code_2(
    tmp_path: Path, arguments: tuple[str, ...], expected: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    defaults = (f"log.dirs={tmp_path / 'data'}", "metrics.port=-1")
    result = serve(*defaults, *(argument.format(file=a_file) for argument in arguments))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert "ERROR" in lines[0] and expected.format(file=a_file) in lines[0]


def test_a_process_of_a_cluster_reports_its_own_config_error_in_one_line(tmp_path: Path) -> None:
    result = serve(
        *("listeners=SSL://127.0.0.1:0", "metrics.port=-1", f"log.dirs={tmp_path / 'data'}"),
        f"ssl.keystore.location={tmp_path}",
        options=("--process-index", "1"),
    )
    assert result.returncode == 2, result.stderr
    assert error_lines(result.stderr) == [
        line for line in result.stderr.splitlines() if "(process 1)" in line and "ERROR" in line
    ]
    assert f"ssl.keystore.location: cannot load the key store {tmp_path}: Is a directory" in (
        result.stderr
    )
