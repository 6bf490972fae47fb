"""`broker client` against a cluster of three processes: leaders and coordinators routed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.broker_harness import start_broker_process, stop_broker_process


def client(bootstrap: str, *args: str, stdin: str = "") -> str:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "client", *args, "--bootstrap-server", bootstrap],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_test_client_produces_and_consumes_across_every_leader(tmp_path: Path) -> None:
    cluster = start_broker_process(
        tmp_path / "data", {"process.count": "3", "group.initial.rebalance.delay.ms": "0"}
    )
    try:
        # One address: the client finds the other processes through Metadata.
        bootstrap = cluster.bootstrap.split(",")[0]
        client(bootstrap, "topics", "create", "spread", "--partitions", "6")
        lines = "".join(f"key-{i}\tvalue-{i}\n" for i in range(300))
        client(bootstrap, "produce", "spread", "-K", "\\t", stdin=lines)
        out = client(bootstrap, "consume", "spread", "--from-beginning", "-e", "-f", "%p %s\n")
        records = [line.split(" ") for line in out.splitlines()]
        assert sorted(value for _, value in records) == sorted(f"value-{i}" for i in range(300))
        assert len({partition for partition, _ in records}) == 6
        # A group: joined and committed at its coordinator, wherever that is.
        grouped = client(
            bootstrap, "consume", "spread", "-g", "readers", "--from-beginning", "-e", "-f", "%s\n"
        )
        assert len(grouped.splitlines()) == 300
        again = client(bootstrap, "consume", "spread", "-g", "readers", "-e", "-f", "%s\n")
        assert again == ""  # the group's committed offsets are at the end
    finally:
        assert stop_broker_process(cluster) == 0
