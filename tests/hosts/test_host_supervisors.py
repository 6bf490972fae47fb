"""Hosts among hosts each run as a supervisor with several processes, every process a
broker of the ZooKeeper cluster (issue 20 item 1, docs/replication.md).

Two hosts on 127.0.0.2 and 127.0.0.3, each `broker serve` with `process.count=2`, its
own rack and log dir, on a real ZooKeeper: four brokers, replicas spread over the
racks, a real client producing with acks=all while one process is killed with -9 and
its supervisor starts it again; nothing acknowledged is lost. The first host's
supervisor serves one HTTP port: both its processes' /metrics (each series labelled
`node`, `broker_process_up` counting the killed one down and back, the consumer lag of a
group its processes coordinate over every partition, those the other host leads too)
and the console."""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import trio
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from broker.client.connection import KafkaConnection
from broker.cluster import supervisor as supervisor_module
from broker.cluster.supervisor import Supervisor
from broker.config import BrokerConfig
from broker.coordination.partition_state_znodes import TopicAssignment
from broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from broker.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from broker.protocol.messages.metadata_request import MetadataRequest
from broker.protocol.messages.metadata_response import MetadataResponse
from tests.cluster.test_cluster_metrics import http_port_of, series
from tests.cluster.test_supervisor import child_pids
from tests.hosts.acknowledged_records import anomalies
from tests.hosts.host_processes import (
    WAIT_S,
    ProducerLoad,
    free_port,
    partitions,
    read_back,
    registered,
    wait_until,
)
from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)

TOPIC = "spread"
PARTITIONS = 4
HOSTS = {"127.0.0.2": (1, "rack-a"), "127.0.0.3": (3, "rack-b")}  # base node id, rack
RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b", 4: "rack-b"}
SESSION_TIMEOUT_MS = 3000
GROUPS = [f"lag-{index}" for index in range(32)]


def consecutive_free_ports(host: str, count: int) -> int:
    """A port p with p..p+count-1 free (process i binds the configured port + i)."""
    for _ in range(50):
        port = free_port(host)
        try:
            for offset in range(1, count):
                with socket.socket() as sock:
                    sock.bind((host, port + offset))
        except OSError:
            continue
        return port
    raise AssertionError(f"no {count} consecutive free ports on {host}")


@pytest.fixture
def supervisors(tmp_path: Path, zookeeper_connect: str) -> Iterator[dict[str, BrokerProcess]]:
    def start(address: str) -> BrokerProcess:
        node_id, rack = HOSTS[address]
        port = consecutive_free_ports(address, 2)
        # Each host's supervisor serves /metrics and the console (on a free port).
        metrics_port = "0"
        return start_broker_process(
            tmp_path / f"host-{rack}",
            {
                "listeners": f"PLAINTEXT://{address}:{port}",
                "process.count": "2",
                "node.id": str(node_id),
                "broker.rack": rack,
                "zookeeper.connect": zookeeper_connect,
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "replica.lag.time.max.ms": "3000",
                # Short retries: a host's processes stop together, so one may ask a
                # controller that is stopping too, and the last host has nowhere to
                # move its leaderships to.
                "controlled.shutdown.retry.backoff.ms": "200",
                "controlled.shutdown.max.retries": "10",
                "num.network.threads": "1",
                "num.io.threads": "2",
                "metrics.port": metrics_port,
            },
            timeout_s=2 * WAIT_S,
        )

    started: dict[str, BrokerProcess] = {}
    try:
        with ThreadPoolExecutor(len(HOSTS)) as pool:
            for address, future in [(a, pool.submit(start, a)) for a in HOSTS]:
                started[address] = future.result()
        yield started
    finally:
        for host in started.values():
            stop_broker_process(host, signal.SIGTERM, timeout_s=WAIT_S)


def brokers(address: str, port: int) -> dict[int, tuple[str, int, str | None]]:
    """Each broker's advertised host, port and rack as Metadata names them."""

    async def ask() -> MetadataResponse:
        with trio.fail_after(10):
            async with await KafkaConnection.connect(address, port, "racks") as connection:
                response: MetadataResponse = await connection.request(MetadataRequest(topics=()), 9)
                return response

    return {b.node_id: (b.host, b.port, b.rack) for b in trio.run(ask).brokers}


def coordinator(address: str, port: int, group: str) -> int:
    """The group's coordinator as FindCoordinator names it (-1: none yet)."""

    async def ask() -> FindCoordinatorResponse:
        with trio.fail_after(10):
            async with await KafkaConnection.connect(address, port, "lag") as connection:
                response: FindCoordinatorResponse = await connection.request(
                    FindCoordinatorRequest(key=group), 1
                )
                return response

    response = trio.run(ask)
    return response.node_id if response.error_code == 0 else -1


def coordinated_group(address: str, port: int) -> tuple[str, int]:
    """A group id and its coordinator (asked again while the offsets topic is still being
    led: COORDINATOR_NOT_AVAILABLE). On hosts `__consumer_offsets` has one partition, so
    every group has the same coordinator, on whichever host leads it."""
    found: list[int] = []

    def led() -> bool:
        found.append(coordinator(address, port, GROUPS[0]))
        return found[-1] >= 0

    wait_until("a group coordinator", led)
    return GROUPS[0], found[-1]


def lag_by_partition(metrics: httpx.Client, group: str) -> dict[int, tuple[str, float]]:
    """The supervisor's `Lag` of the group per partition of TOPIC, with its node."""
    text = metrics.get("/metrics").text
    found = series(text, "kafka_server_consumergrouplag_lag")
    return {
        int(labels["partition"]): (labels["node"], value)
        for labels, value in ((dict(k), v) for k, v in found.items())
        if labels["group"] == group and labels["topic"] == TOPIC
    }


def console_lag(metrics: httpx.Client, group: str) -> dict[int, int]:
    """The lag per partition of TOPIC on the console's page of the group."""
    described = metrics.get(f"/console/api/groups/{group}").json()
    return {o["partition"]: o["lag"] for o in described["offsets"] if o["topic"] == TOPIC}


def processes_up(metrics: httpx.Client) -> dict[str, float]:
    """`broker_process_up` of each node, as the supervisor's /metrics has it."""
    text = metrics.get("/metrics").text
    return {dict(labels)["node"]: up for labels, up in series(text, "broker_process_up").items()}


def led_by(metrics: httpx.Client) -> set[str]:
    """The nodes whose series name a partition of TOPIC they lead."""
    text = metrics.get("/metrics").text
    samples = series(text, "kafka_log_log_logendoffset")
    return {dict(k)["node"] for k in samples if dict(k)["topic"] == TOPIC}


def test_two_hosts_of_two_processes_each_form_one_cluster_that_survives_a_killed_process(
    supervisors: dict[str, BrokerProcess],
) -> None:
    servers = ",".join(f"{address}:{host.port}" for address, host in supervisors.items())
    wait_until("four brokers registered", lambda: registered(servers) == {1, 2, 3, 4})
    first = supervisors["127.0.0.2"]
    # Process i of a host: node.id + i on the listener's port + i, with the host's rack.
    known = brokers("127.0.0.2", first.port)
    assert {node: rack for node, (_host, _port, rack) in known.items()} == RACKS
    for base, address in ((1, "127.0.0.2"), (3, "127.0.0.3")):
        assert {known[base][0], known[base + 1][0]} == {address}
        assert known[base + 1][1] == known[base][1] + 1
        assert supervisors[address].port in (known[base][1], known[base + 1][1])

    # The first host's supervisor: one HTTP port for both its processes.
    http_port = http_port_of(first)
    metrics = httpx.Client(base_url=f"http://127.0.0.2:{http_port}", timeout=WAIT_S)
    assert processes_up(metrics) == {"1": 1.0, "2": 1.0}
    text = metrics.get("/metrics").text
    assert {dict(k)["node"] for k in series(text, "process_open_fds")} == {"1", "2"}
    # Its console speaks Kafka to one of them and sees the whole cluster.
    overview = metrics.get("/console/api/overview").json()
    assert [b["node_id"] for b in overview["brokers"]] == [1, 2, 3, 4]

    admin = AdminClient({"bootstrap.servers": servers})
    created = admin.create_topics(
        [NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=2)]
    )
    created[TOPIC].result(timeout=WAIT_S)
    views = partitions(servers, TOPIC)
    assert len(views) == PARTITIONS
    for index, view in views.items():
        assert {RACKS[node] for node in view.replicas} == {"rack-a", "rack-b"}, (index, view)

    # The partitions each process of the first host leads, labelled with its node (as
    # Metadata says now: a leadership just created may still move, so asked each time).
    seen: list[tuple[set[str], set[str]]] = []

    def series_name_the_first_hosts_leaders() -> bool:
        views = partitions(servers, TOPIC)
        leaders = {str(view.leader) for view in views.values() if view.leader in (1, 2)}
        seen.append((led_by(metrics), leaders))
        return seen[-1][0] == leaders

    try:
        wait_until(
            "the first host's leaders' log series in its supervisor's /metrics",
            series_name_the_first_hosts_leaders,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen (series, leaders): {seen[-3:]}") from None

    # Kill -9 a process of the first host that leads a partition, under load; its
    # supervisor starts it again once ZooKeeper has ended the dead process's session.
    node = min((view.leader for view in views.values() if view.leader in (1, 2)), default=2)
    index = node - 1
    load = ProducerLoad(servers, TOPIC, PARTITIONS, count=400, duration_s=8.0)
    load.start()
    wait_until(
        "records acknowledged", lambda: sum(len(h.acknowledged) for h in load.histories) > 50
    )
    victim = child_pids(first.process.pid)[index]
    os.kill(victim, signal.SIGKILL)
    wait_until(
        f"node {node} counted down by the supervisor's /metrics",
        lambda: processes_up(metrics)[str(node)] == 0.0,
    )
    wait_until(
        f"node {node} restarted by its supervisor",
        lambda: (
            f"broker process {index} (node {node}) exited with -9" in first.log_text()
            and child_pids(first.process.pid).get(index, victim) != victim
            and registered(servers) == {1, 2, 3, 4}
        ),
    )
    wait_until(
        f"node {node} back in the supervisor's /metrics",
        lambda: processes_up(metrics) == {"1": 1.0, "2": 1.0},
    )
    history = load.join()
    assert not load.fatal

    def full_isr() -> bool:
        now = partitions(servers, TOPIC)
        return all(len(v.isr) == 2 and v.leader >= 0 for v in now.values())

    wait_until("every partition back to its full ISR", full_isr)
    assert len(history.acknowledged) > 50, "too few records were acknowledged"
    assert not anomalies(history, read_back(servers, TOPIC, PARTITIONS))

    # The lag of a group, in the /metrics of the host that coordinates it, over
    # partitions both hosts lead (the other host's asked with ListOffsets).
    group, coordinator_node = coordinated_group("127.0.0.2", first.port)
    coordinating = "127.0.0.2" if coordinator_node in (1, 2) else "127.0.0.3"
    other_nodes = (3, 4) if coordinating == "127.0.0.2" else (1, 2)
    led_now = {view.leader for view in partitions(servers, TOPIC).values()}
    assert led_now & set(other_nodes), (coordinating, led_now)
    lag_metrics = httpx.Client(
        base_url=f"http://{coordinating}:{http_port_of(supervisors[coordinating])}",
        timeout=WAIT_S,
    )
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, 1) for p in range(PARTITIONS)], asynchronous=False
        )
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=WAIT_S)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()
    expected = {p: (str(coordinator_node), end - 1.0) for p, end in ends.items()}
    wait_until(
        "the group's lag of every partition in the coordinating host's /metrics",
        lambda: lag_by_partition(lag_metrics, group) == expected,
    )
    lag_metrics.close()
    # Its console's group page asks every partition's leader too (ListOffsets; its
    # session to the process killed above is dropped at the first answer and made again).
    wait_until(
        "the group's lag of every partition on the console's group page",
        lambda: console_lag(metrics, group) == {p: end - 1 for p, end in ends.items()},
    )

    metrics.close()

    # SIGTERM: the supervisor stops each process with its controlled shutdown, which
    # hands its leaderships to the other host first.
    assert stop_broker_process(first, signal.SIGTERM, timeout_s=WAIT_S) == 0
    assert first.log_text().count("controlled shutdown succeeded") == 2
    second = supervisors["127.0.0.3"]
    left = partitions(f"127.0.0.3:{second.port}", TOPIC)
    assert {view.leader for view in left.values()} <= {3, 4}, left


async def test_a_process_no_longer_on_its_host_is_named_with_the_partitions_it_leaves_short(
    tmp_path: Path, zookeeper_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    """process.count lowered from 4 to 2: nodes 3 and 4 (their `node-<id>` dirs still
    on the host) stay in their partitions' replica lists, as Kafka leaves a broker taken
    away, and the supervisor names those partitions once, at start."""
    servers, _, chroot = zookeeper_connect.partition("/")
    assignment = TopicAssignment("orders", {0: (1, 3), 1: (2, 4), 2: (3, 1), 3: (1, 2)})
    client = KazooClient(hosts=servers)
    client.start(timeout=WAIT_S)
    try:
        client.create(f"/{chroot}/brokers/topics/orders", assignment.encode(), makepath=True)
    finally:
        client.stop()
        client.close()
    for node in (1, 2, 3, 4):
        (tmp_path / "logs" / f"node-{node}").mkdir(parents=True)
    (tmp_path / "logs" / "node-x").mkdir()  # not a node's dir
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.2:0",
            "log.dirs": str(tmp_path / "logs"),
            "node.id": "1",
            "process.count": "2",
            "zookeeper.connect": zookeeper_connect,
        }
    )
    supervisor = Supervisor(config, None, [], "INFO")
    assert supervisor.removed_nodes() == [3, 4]
    assert supervisor.zookeeper is not None
    await supervisor.zookeeper.connect()
    try:
        with caplog.at_level(logging.WARNING, logger=supervisor_module.__name__):
            await supervisor.report_removed_processes()
    finally:
        await supervisor.zookeeper.close()
    lines = [r.getMessage() for r in caplog.records if "no longer a process" in r.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].startswith("node 3 is no longer a process of this host (process.count=2)")
    assert lines[0].endswith(
        "still a replica of 2 partitions, under-replicated until they "
        "are reassigned (AlterPartitionReassignments): orders-0, orders-2"
    )
    assert lines[1].startswith("node 4 ")
    assert lines[1].endswith(
        "replica of 1 partitions, under-replicated until they are "
        "reassigned (AlterPartitionReassignments): orders-1"
    )
