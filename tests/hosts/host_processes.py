"""Three hosts as a user runs them: each a `broker serve` process on its own loopback
address and fixed port, with its own log dir and rack, coordinated through a ZooKeeper
the test started; and the load and read-back of the fault tests over confluent-kafka.

A host keeps its port and log dir across restarts, so clients meet it where they knew
it and it recovers its own log. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.connection import KafkaConnection
from broker.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from broker.protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse
from broker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from broker.protocol.messages.metadata_response import MetadataResponse
from tests.hosts.acknowledged_records import ProducedHistory, SentValue
from tests.hosts.network_namespaces import HostNetworks, NetworkNamespace
from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)

WAIT_S = 40.0
METADATA_VERSION = 9  # leader epochs
LOG_DIRS_VERSION = 1
ADDRESSES = {1: ("127.0.0.2", "rack-a"), 2: ("127.0.0.3", "rack-b"), 3: ("127.0.0.4", "rack-c")}


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@attrs.define
class Host:
    """One host's broker process; `process` is None while it is down. A host with a
    `network` runs in that namespace (`network_namespaces.py`)."""

    node_id: int
    address: str
    port: int
    data_dir: Path
    overrides: dict[str, str]
    network: NetworkNamespace | None = None
    process: BrokerProcess | None = None
    starts: int = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.address}:{self.port}"

    def start(self) -> None:
        assert self.process is None, f"host {self.node_id} is running"
        log_path = self.data_dir.parent / f"{self.data_dir.name}-broker.log"
        if log_path.exists():  # keep the earlier run's log beside the new one
            log_path.rename(log_path.with_suffix(f".log.{self.starts}"))
        self.starts += 1
        with self.network.entered() if self.network else nullcontext():
            self.process = start_broker_process(self.data_dir, self.overrides, timeout_s=WAIT_S)

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        os.kill(self.process.process.pid, sig)

    def kill(self) -> None:
        """kill -9: no shutdown at all, the session left to expire."""
        assert self.process is not None
        self.process.process.kill()
        self.process.process.wait(WAIT_S)
        self.process = None

    def stop(self) -> int:
        """SIGTERM and wait for the exit (after SIGCONT should it be stopped)."""
        assert self.process is not None
        if self.process.process.poll() is None:
            os.kill(self.process.process.pid, signal.SIGCONT)
        code = stop_broker_process(self.process, signal.SIGTERM, timeout_s=WAIT_S)
        self.process = None
        return code


@attrs.define
class Hosts:
    hosts: dict[int, Host]

    @property
    def bootstrap(self) -> str:
        return ",".join(host.bootstrap for host in self.hosts.values())

    def start(self, node_ids: list[int] | None = None) -> None:
        """Start hosts side by side (each process takes seconds to import and bind)."""
        chosen = [self.hosts[i] for i in node_ids or list(self.hosts)]
        with ThreadPoolExecutor(len(chosen)) as pool:
            for started in [pool.submit(host.start) for host in chosen]:
                started.result()

    def stop_all(self) -> None:
        for host in self.hosts.values():
            if host.process is not None:
                host.stop()


@attrs.frozen
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = -1


def hosts_cluster(
    tmp_path: Path,
    zookeeper_connect: str,
    extra: Mapping[str, str],
    networks: HostNetworks | None = None,
) -> Iterator[Hosts]:
    """Three hosts started, then stopped whatever the test did to them; with `networks`,
    each in its own namespace at the address it has there."""
    hosts = Hosts({})
    for node_id, (loopback, rack) in ADDRESSES.items():
        network = networks.hosts[node_id] if networks else None
        address = networks.addresses[node_id] if networks else loopback
        with network.entered() if network else nullcontext():
            port = free_port(address)
        overrides = {
            "listeners": f"PLAINTEXT://{address}:{port}",
            "node.id": str(node_id),
            "broker.rack": rack,
            "zookeeper.connect": zookeeper_connect,
            "cluster.id": "fault-tests",  # /cluster/id is not read yet
            "num.network.threads": "1",
            "num.io.threads": "2",
            **extra,
        }
        data_dir = tmp_path / f"host-{node_id}"
        hosts.hosts[node_id] = Host(node_id, address, port, data_dir, overrides, network)
    try:
        hosts.start()
        wait_until("every host registered", lambda: len(registered(hosts.bootstrap)) == 3)
        yield hosts
    finally:
        hosts.stop_all()


def registered(servers: str) -> set[int]:
    """The brokers Metadata lists (those registered in ZooKeeper)."""
    return set(AdminClient({"bootstrap.servers": servers}).list_topics(timeout=10).brokers)


def create_topic(servers: str, topic: str, partitions: int) -> None:
    """Retried while fewer than three brokers are registered (a host the previous test
    restarted may still be registering: INVALID_REPLICATION_FACTOR)."""
    admin = AdminClient({"bootstrap.servers": servers})
    deadline = time.monotonic() + WAIT_S
    while True:
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=3)]
        )
        try:
            futures[topic].result(timeout=WAIT_S)
            return
        except KafkaException as exc:
            code = exc.args[0].code()
            if code != KafkaError.INVALID_REPLICATION_FACTOR or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def partitions(servers: str, topic: str) -> dict[int, PartitionView]:
    """Leader, replicas and ISR per partition as a client's Metadata shows them."""
    admin = AdminClient({"bootstrap.servers": servers})
    described = admin.list_topics(topic, timeout=10).topics[topic]
    return {
        index: PartitionView(p.leader, tuple(p.replicas), tuple(sorted(p.isrs)))
        for index, p in described.partitions.items()
    }


def wait_until(what: str, ready: Callable[[], bool], timeout_s: float = WAIT_S) -> float:
    """Poll `ready` until it holds (exceptions count as not yet); the seconds it took."""
    started = time.monotonic()
    while not _holds(ready):
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.2)
    return time.monotonic() - started


def _holds(ready: Callable[[], bool]) -> bool:
    try:
        return ready()
    except Exception:  # a cluster in the middle of a fault answers badly
        return False


def ask_host(host: Host, request: Any, version: int) -> Any:
    """One request to this one host, on a connection of its own."""

    async def ask() -> Any:
        with trio.fail_after(10):
            async with await KafkaConnection.connect(host.address, host.port, "checker") as c:
                return await c.request(request, version)

    return trio.run(ask)


def host_metadata(host: Host, topic: str) -> MetadataResponse:
    """Metadata of the topic as this one host answers it (a client may ask any)."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False
    )
    response: MetadataResponse = ask_host(host, request, METADATA_VERSION)
    return response


def replica_sizes(host: Host, topic: str) -> dict[int, int]:
    """The bytes of each of the topic's replicas on this host (DescribeLogDirs): replicas
    holding the same batches have the same size."""
    response: DescribeLogDirsResponse = ask_host(
        host, DescribeLogDirsRequest(topics=None), LOG_DIRS_VERSION
    )
    return {
        p.partition_index: p.partition_size
        for result in response.results
        for t in result.topics
        if t.name == topic
        for p in t.partitions
    }


def host_partitions(host: Host, topic: str) -> dict[int, PartitionView]:
    """The topic's partitions as this one host answers Metadata."""
    return {
        p.partition_index: PartitionView(
            p.leader_id, p.replica_nodes, tuple(sorted(p.isr_nodes)), p.leader_epoch
        )
        for t in host_metadata(host, topic).topics
        for p in t.partitions
    }


def wait_for_full_isr(hosts: Hosts, topic: str, count: int) -> float:
    """Every partition led, every replica in its ISR, the same leaders and epochs as every
    running host answers: a host that was stopped answers from its old view until it has
    read the new one, so one host's Metadata alone is not enough."""

    def full(views: dict[int, PartitionView]) -> bool:
        return len(views) == count and all(
            v.leader >= 0 and v.isr == tuple(sorted(v.replicas)) and len(v.isr) == 3
            for v in views.values()
        )

    def agreed() -> bool:
        running = [h for h in hosts.hosts.values() if h.process is not None]
        answers = [host_partitions(host, topic) for host in running]
        return all(full(views) for views in answers) and all(a == answers[0] for a in answers)

    return wait_until(f"{topic}: every partition led with its full ISR on every host", agreed)


@attrs.define
class ProducerLoad:
    """Idempotent producers (acks=all) in threads, each sending `count` values spread over
    the partitions at a bounded pace, noting every send and acknowledgement."""

    servers: str
    topic: str
    partition_count: int
    count: int
    duration_s: float
    producers: int = 2
    histories: list[ProducedHistory] = attrs.field(factory=list)
    fatal: list[str] = attrs.field(factory=list)
    _threads: list[threading.Thread] = attrs.field(factory=list)

    def start(self) -> None:
        for index in range(self.producers):
            history = ProducedHistory()
            self.histories.append(history)
            thread = threading.Thread(target=self._produce, args=(f"p{index}", history))
            thread.start()
            self._threads.append(thread)

    def join(self) -> ProducedHistory:
        """Wait for every producer to finish (each flushes within its bounds)."""
        for thread in self._threads:
            thread.join(self.duration_s + 2 * WAIT_S)
            assert not thread.is_alive(), "a producer did not finish"
        merged = ProducedHistory()
        for history in self.histories:
            merged.merge(history)
        return merged

    def _produce(self, name: str, history: ProducedHistory) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": int(WAIT_S * 1000 / 2),
                "retry.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": lambda error: self._on_error(name, error),
            }
        )

        def delivered(error: KafkaError | None, message: Message) -> None:
            value, partition, offset = message.value(), message.partition(), message.offset()
            assert value is not None
            if error is None:  # the offset is None when librdkafka acknowledged implicitly
                assert partition is not None
                history.on_acknowledged(value, partition, offset, time.monotonic())
            else:
                history.on_failed(value, str(error))

        started = time.monotonic()
        for sequence in range(self.count):
            value = SentValue(name, sequence).encode()
            history.on_sent(value, time.monotonic())
            partition = sequence % self.partition_count
            producer.produce(self.topic, value, partition=partition, on_delivery=delivered)
            # poll returns at each delivery: the pace is kept by the clock, not by it.
            next_at = started + (sequence + 1) * self.duration_s / self.count
            while (left := next_at - time.monotonic()) > 0:
                producer.poll(left)
        producer.flush(WAIT_S)

    def _on_error(self, name: str, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(f"{name}: {error}")


def read_back(servers: str, topic: str, count: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition read from its start to its high watermark: (offset, value)."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "fault-checker",  # never joined: partitions are assigned
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    read: dict[int, list[tuple[int, bytes]]] = {}
    try:
        for partition in range(count):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            records: list[tuple[int, bytes]] = []
            consumer.assign([TopicPartition(topic, partition, low)])
            deadline = time.monotonic() + WAIT_S
            while (not records or records[-1][0] < high - 1) and low < high:
                assert time.monotonic() < deadline, f"partition {partition} not read to {high}"
                message = consumer.poll(0.5)
                if message is None or message.error() is not None:
                    continue
                value, offset = message.value(), message.offset()
                assert value is not None and offset is not None
                records.append((offset, value))
            read[partition] = records
    finally:
        consumer.close()
    return read
