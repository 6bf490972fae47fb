"""The supervisor of a cluster: start, restart on death, graceful stop, start-up failures."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from broker.cluster.member import PEER_SOCKET_DIR_KEY
from broker.cluster.metadata_store import SqliteMetadataStore
from broker.cluster.supervisor import MAX_RESTART_DELAY_S, RESTART_DELAY_S, restart_delay
from tests.integration.broker_harness import (
    start_broker_process,
    stop_broker_process,
)

CLUSTER = {"process.count": "3", "num.network.threads": "1", "num.io.threads": "2"}


def child_pids(supervisor: int) -> dict[int, int]:
    """process index -> pid of the supervisor's broker processes."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == supervisor and b"--process-index" in args:
            found[int(args[args.index(b"--process-index") + 1])] = int(entry.name)
    return found


def wait_until(condition: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout_s}s")


def alive_nodes(data_dir: Path) -> list[int]:
    store = SqliteMetadataStore(data_dir)
    try:
        return [b.node_id for b in store.read_image().alive_brokers()]
    finally:
        store.close()


def test_the_supervisor_starts_every_process_with_its_own_node_id_and_port(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    cluster = start_broker_process(data, {**CLUSTER, "node.id": "10"})
    try:
        ports = cluster.node_ports()
        assert sorted(ports) == [10, 11, 12]
        assert len(set(ports.values())) == 3
        assert alive_nodes(data) == [10, 11, 12]
        assert sorted(child_pids(cluster.process.pid)) == [0, 1, 2]
        time.sleep(1.0)  # 20 times the followers' poll interval: their first checks are done
        text = cluster.log_text()
        # The config once (by the supervisor), each process's own settings in one line.
        assert text.count("config node.id = 10\n") == 1
        assert text.count("config num.io.threads = 2\n") == 1
        assert "broker process 2: node.id=12, listeners=" in text
        # Nothing changed the shared files on a fresh start: no "reloaded" line says so.
        assert "changed by another process" not in text
    finally:
        assert stop_broker_process(cluster) == 0


def test_sigterm_stops_every_process_gracefully_and_exits_zero(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cluster = start_broker_process(data, CLUSTER)
    children = child_pids(cluster.process.pid)
    assert stop_broker_process(cluster, signal.SIGTERM, timeout_s=30) == 0
    for pid in children.values():
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    text = cluster.log_text()
    assert text.count("shut down") >= 3
    for node in (1, 2, 3):
        assert (data / f".kafka_cleanshutdown.node-{node}").exists()


def test_a_killed_process_is_restarted_and_registers_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cluster = start_broker_process(data, CLUSTER)
    try:
        before = child_pids(cluster.process.pid)
        os.kill(before[1], signal.SIGKILL)
        # The delay docs/cluster.md gives, logged as it is waited.
        wait_until(lambda: "exited with -9; restarting it in 0.5 s" in cluster.log_text())
        wait_until(lambda: child_pids(cluster.process.pid).get(1) not in (None, before[1]))
        wait_until(lambda: alive_nodes(data) == [1, 2, 3])
        assert cluster.process.poll() is None
    finally:
        assert stop_broker_process(cluster) == 0


def test_a_process_that_cannot_bind_fails_the_start_with_a_clear_message(
    tmp_path: Path,
) -> None:
    base = consecutive_free_ports(2)
    with socket.socket() as taken:
        # Process 1 listens on base + 1: taken.
        taken.bind(("127.0.0.1", base + 1))
        taken.listen()
        args = [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{base}",
            "--override",
            f"log.dirs={tmp_path / 'data'}",
            "--override",
            "metrics.port=-1",
            "--override",
            "process.count=2",
        ]
        result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert "broker process 1 (node 2) failed to start" in result.stderr
    assert "ddress already in use" in result.stderr


def test_a_second_cluster_on_the_same_log_dir_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cluster = start_broker_process(data, {**CLUSTER, "process.count": "2"})
    try:
        args = [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={data}",
            "--override",
            "metrics.port=-1",
            "--override",
            "process.count=2",
        ]
        result = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 1
        assert "is in use by another broker process" in result.stderr
        assert cluster.process.poll() is None
    finally:
        assert stop_broker_process(cluster) == 0


def test_the_processes_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", {**CLUSTER, "process.count": "2"})
    children = child_pids(cluster.process.pid)
    assert len(children) == 2
    assert stop_broker_process(cluster, signal.SIGKILL) == -signal.SIGKILL
    wait_until(lambda: all_exited(children.values()))


def all_exited(pids: Iterable[int]) -> bool:
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            return False
    return True


def peer_socket_dir(data_dir: Path) -> Path:
    store = SqliteMetadataStore(data_dir)
    try:
        return Path(str(store.get(PEER_SOCKET_DIR_KEY)))
    finally:
        store.close()


def test_a_restart_after_the_supervisor_was_killed_removes_its_peer_sockets(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    settings = {**CLUSTER, "process.count": "2"}
    cluster = start_broker_process(data, settings)
    children = child_pids(cluster.process.pid)
    stale = peer_socket_dir(data)
    assert stale.is_dir()
    assert stop_broker_process(cluster, signal.SIGKILL) == -signal.SIGKILL
    wait_until(lambda: all_exited(children.values()))
    assert stale.is_dir(), "nobody was left to remove it"
    again = start_broker_process(data, settings)
    try:
        assert not stale.exists()
        fresh = peer_socket_dir(data)
        assert fresh.is_dir() and fresh != stale
    finally:
        assert stop_broker_process(again) == 0
    assert not fresh.exists()


def consecutive_free_ports(count: int) -> int:
    """A base port with `count` free ports from it (bounded number of tries)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise AssertionError("no run of free ports found")


def test_a_process_that_keeps_failing_is_restarted_less_often_until_it_comes_back(
    tmp_path: Path,
) -> None:
    base = consecutive_free_ports(2)
    data = tmp_path / "data"
    settings = {**CLUSTER, "process.count": "2", "listeners": f"PLAINTEXT://127.0.0.1:{base}"}
    cluster = start_broker_process(data, settings)
    try:
        os.kill(child_pids(cluster.process.pid)[1], signal.SIGKILL)
        with socket.socket() as squatter:
            wait_until(lambda: _try_bind(squatter, base + 1))
            squatter.listen()
            wait_until(lambda: "restarting it in 1.0 s" in cluster.log_text())
            wait_until(lambda: "restarting it in 2.0 s" in cluster.log_text())
            assert alive_nodes(data) == [1]
        wait_until(lambda: alive_nodes(data) == [1, 2])
        assert cluster.process.poll() is None
    finally:
        assert stop_broker_process(cluster) == 0


def _try_bind(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def test_a_dead_process_waits_the_documented_delay_doubling_while_it_keeps_dying() -> None:
    delays = [restart_delay(None, quick=True)]
    for _ in range(8):
        delays.append(restart_delay(delays[-1], quick=True))
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, MAX_RESTART_DELAY_S, 30.0, 30.0]
    # Dying after it had run stably: the first delay again, not a shorter one.
    assert restart_delay(16.0, quick=False) == RESTART_DELAY_S
    documented = (Path(__file__).parents[2] / "docs" / "cluster.md").read_text()
    assert f"restarted after {RESTART_DELAY_S:g} s (doubling, up\nto {MAX_RESTART_DELAY_S:g} s" in (
        documented
    )
