"""kill -9 of every process of a host of several processes, then the host started again
on its log dirs (issue 20's first fault, for a host that runs a supervisor).

Three hosts on a real ZooKeeper: 127.0.0.2 runs `process.count=2` (nodes 1 and 2,
rack-a) under its supervisor, 127.0.0.3 and 127.0.0.4 one process each (nodes 3 and 4,
racks b and c). A topic of 4 partitions with replication factor 3 has a replica on each
rack, so the first host's loss leaves every partition two in-sync replicas
(min.insync.replicas=2): idempotent acks=all producers carry on once the partitions it
led have new leaders. The supervisor and both its processes are killed together; the
host started again on its log dirs rejoins every ISR, and the checker finds every
acknowledged record once, in order.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.cluster.test_supervisor import child_pids
from tests.hosts.acknowledged_records import anomalies
from tests.hosts.acknowledged_since import partitions_acknowledged_since
from tests.hosts.host_processes import (
    WAIT_S,
    Host,
    Hosts,
    ProducerLoad,
    create_topic,
    host_partitions,
    read_back,
    registered,
    replica_sizes,
    wait_for_full_isr,
    wait_until,
)
from tests.hosts.test_host_supervisors import consecutive_free_ports

PARTITIONS = 4
SESSION_TIMEOUT_MS = 3000
HOSTS = {  # first node id: address, rack, processes
    1: ("127.0.0.2", "rack-a", 2),
    3: ("127.0.0.3", "rack-b", 1),
    4: ("127.0.0.4", "rack-c", 1),
}
SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "min.insync.replicas": "2",
    "controlled.shutdown.retry.backoff.ms": "200",
    "controlled.shutdown.max.retries": "10",
    "num.network.threads": "1",
    "num.io.threads": "2",
}


@pytest.fixture
def hosts(tmp_path: Path, zookeeper_connect: str) -> Iterator[Hosts]:
    hosts = Hosts({})
    for node_id, (address, rack, processes) in HOSTS.items():
        port = consecutive_free_ports(address, processes)
        overrides = {
            **SETTINGS,
            "listeners": f"PLAINTEXT://{address}:{port}",
            "process.count": str(processes),
            "node.id": str(node_id),
            "broker.rack": rack,
            "zookeeper.connect": zookeeper_connect,
        }
        hosts.hosts[node_id] = Host(node_id, address, port, tmp_path / rack, overrides)
    try:
        hosts.start()
        wait_until("four brokers registered", lambda: registered(hosts.bootstrap) == {1, 2, 3, 4})
        yield hosts
    finally:
        hosts.stop_all()


def kill_every_process(host: Host) -> list[int]:
    """SIGKILL to the supervisor and each of its broker processes at once (no
    controlled shutdown, no session closed: ZooKeeper ends them after the timeout)."""
    assert host.process is not None
    supervisor = host.process.process.pid
    pids = [supervisor, *child_pids(supervisor).values()]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    host.process.process.wait(WAIT_S)
    host.process = None
    wait_until("every process of the host gone", lambda: not any(alive(pid) for pid in pids))
    return pids


def alive(pid: int) -> bool:
    """Still running (a killed child lingers as a zombie until it is reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def replicas_agree(hosts: Hosts, topic: str) -> bool:
    """Every partition's three replicas the same size, asking each broker process (a
    host's process i listens on its port + i)."""
    sizes: dict[int, set[int]] = {}
    held = 0
    for host in hosts.hosts.values():
        for index in range(int(host.overrides["process.count"])):
            process = attrs.evolve(host, port=host.port + index, process=None)
            for partition, size in replica_sizes(process, topic).items():
                sizes.setdefault(partition, set()).add(size)
                held += 1
    return held == 3 * PARTITIONS and all(len(found) == 1 for found in sizes.values())


def test_every_process_of_a_host_killed_and_the_host_brought_back_loses_nothing(
    hosts: Hosts,
) -> None:
    topic = f"whole-host-{uuid.uuid4().hex[:8]}"
    create_topic(hosts.bootstrap, topic, PARTITIONS)
    wait_for_full_isr(hosts, topic, PARTITIONS)
    views = host_partitions(hosts.hosts[3], topic)
    racks = {1: "a", 2: "a", 3: "b", 4: "c"}
    for index, view in views.items():
        assert sorted(racks[node] for node in view.replicas) == ["a", "b", "c"], (index, view)
    led = {p for p, view in views.items() if view.leader in (1, 2)}
    load = ProducerLoad(hosts.bootstrap, topic, PARTITIONS, count=120, duration_s=10.0)
    load.start()
    wait_until(
        "records acknowledged", lambda: sum(len(h.acknowledged) for h in load.histories) > 20
    )

    killed_at = time.monotonic()
    pids = kill_every_process(hosts.hosts[1])
    print(f"killed host 127.0.0.2: supervisor and processes {pids}")

    resumed_s = wait_until(
        "acks=all on every partition",
        lambda: len(partitions_acknowledged_since(load, killed_at)) == PARTITIONS,
    )
    print(f"acks=all on every partition, {sorted(led)} led by the host, after {resumed_s:.2f} s")
    hosts.hosts[1].start()
    rejoined_s = wait_for_full_isr(hosts, topic, PARTITIONS)
    print(f"host back: nodes 1 and 2 in every ISR after {rejoined_s:.2f} s")
    history = load.join()
    assert load.fatal == []
    wait_until("every replica holds its leader's bytes", lambda: replicas_agree(hosts, topic))
    assert anomalies(history, read_back(hosts.bootstrap, topic, PARTITIONS)) == []
    assert len(history.acknowledged) > len(history.sent) / 2, history.failed
