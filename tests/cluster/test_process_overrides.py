"""What differs between a supervisor's processes: in the one-host cluster the node id and
ports; on a host among hosts (`zookeeper.connect`) also each process's own log dirs, each
process being a whole broker (docs/cluster.md, docs/replication.md); `metrics.port` is the
supervisor's in both."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from broker.cluster.supervisor import Supervisor, check_process_configs, process_overrides
from broker.config import BrokerConfig, ConfigError

ONE_HOST = {
    "node.id": "5",
    "listeners": "PLAINTEXT://127.0.0.2:9092",
    "advertised.listeners": "PLAINTEXT://host-a:19092",
    "metrics.port": "9404",
}


def config(tmp_path: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig({**ONE_HOST, "log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}", **extra})


def test_processes_of_the_one_host_cluster_differ_only_in_node_id_and_ports(
    tmp_path: Path,
) -> None:
    assert process_overrides(config(tmp_path), 2) == {
        "node.id": "7",
        "listeners": "PLAINTEXT://127.0.0.2:9094",
        "advertised.listeners": "PLAINTEXT://host-a:19094",
    }


def test_each_process_of_a_host_among_hosts_has_its_own_log_dirs(
    tmp_path: Path,
) -> None:
    host = config(tmp_path, **{"zookeeper.connect": "127.0.0.1:2181"})
    assert process_overrides(host, 1) == {
        "node.id": "6",
        "listeners": "PLAINTEXT://127.0.0.2:9093",
        "advertised.listeners": "PLAINTEXT://host-a:19093",
        "log.dirs": f"{tmp_path / 'a' / 'node-6'},{tmp_path / 'b' / 'node-6'}",
    }
    assert process_overrides(host, 0)["log.dirs"] == (
        f"{tmp_path / 'a' / 'node-5'},{tmp_path / 'b' / 'node-5'}"
    )


def test_a_process_whose_port_would_be_out_of_range_is_refused_before_any_starts(
    tmp_path: Path,
) -> None:
    host = config(
        tmp_path,
        **{"zookeeper.connect": "127.0.0.1:2181", "listeners": "PLAINTEXT://127.0.0.2:65535"},
    )
    with pytest.raises(ConfigError, match="for process 1 of the cluster"):
        check_process_configs(host, 2)


def test_a_host_of_processes_refuses_a_log_dir_holding_one_brokers_log(tmp_path: Path) -> None:
    """Each process's log is in `node-<id>`: one left at the top would be ignored."""
    host = config(tmp_path, **{"zookeeper.connect": "127.0.0.1:2181", "process.count": "2"})
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "meta.properties").write_text("version=1\nnode.id=5\n")
    supervisor = Supervisor(host, None, [], "INFO")
    with pytest.raises(ConfigError, match=r"log.dirs: .*/b holds the log of one broker"):
        supervisor.prepare()
    assert not (tmp_path / "a" / "node-5").exists()  # nothing made before the refusal


def prepared(host: BrokerConfig) -> Supervisor:
    """A supervisor that has prepared the host and let go of the log dirs' locks."""
    supervisor = Supervisor(host, None, [], "INFO")
    try:
        supervisor.prepare()
    finally:
        for fd in supervisor._lock_fds:
            os.close(fd)
    return supervisor


def test_a_host_of_processes_makes_each_process_its_log_dirs_and_a_socket_dir(
    tmp_path: Path,
) -> None:
    host = config(tmp_path, **{"zookeeper.connect": "127.0.0.1:2181", "process.count": "2"})
    supervisor = prepared(host)
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/node-*"))
    assert made == ["a/node-5", "a/node-6", "b/node-5", "b/node-6"]
    assert supervisor.store is None  # no metadata store: ZooKeeper is the store
    assert not list(tmp_path.glob("*/cluster-metadata.sqlite"))
    # The processes' metrics sockets' dir; one a killed supervisor left goes at the next start.
    first = supervisor.peer_dir
    assert first is not None and first.is_dir()
    second = prepared(host).peer_dir
    assert second is not None and second.is_dir()
    assert not first.exists()
    shutil.rmtree(second)


def test_a_host_without_metrics_port_makes_no_socket_dir(tmp_path: Path) -> None:
    host = config(tmp_path, **{"zookeeper.connect": "127.0.0.1:2181", "metrics.port": "-1"})
    assert prepared(host).peer_dir is None
