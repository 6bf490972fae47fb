"""Three brokers, each on its own loopback address, coordinated through a real
ZooKeeper: one cluster in Metadata, topics placed with their replicas, a real client
producing to the leader and consuming back, and leadership moving when the leader's
broker stops."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.connection import KafkaConnection
from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from broker.server import KafkaServer
from tests.integration.broker_harness import broker_process, running_broker
from tests.integration.data_helpers import batch, produce_request
from tests.topology.test_layering import BROKER, COMPOSITION_ROOT, importers_of

WAIT_S = 30
HOSTS = {1: ("127.0.0.2", "rack-a"), 2: ("127.0.0.3", "rack-b"), 3: ("127.0.0.4", "rack-c")}
METADATA_VERSION = 9  # racks, leader epochs


def running_host(
    tmp_path: Path, node_id: int, zookeeper: str, extra: Mapping[str, str] | None = None
) -> AbstractAsyncContextManager[KafkaServer]:
    address, rack = HOSTS[node_id]
    overrides = {
        "listeners": f"PLAINTEXT://{address}:0",
        "node.id": str(node_id),
        "broker.rack": rack,
        "zookeeper.connect": zookeeper,
        # Seeds /cluster/id (the first broker writes it; the others take it from there).
        "cluster.id": "hosts-test-cluster",
        # A broker stopping last leads partitions no other replica can take: retry soon.
        "controlled.shutdown.retry.backoff.ms": "100",
        **(extra or {}),
    }
    return running_broker(tmp_path / f"host-{node_id}", overrides, deployment=ZooKeeperDeployment)


async def metadata(server: KafkaServer, topic: str | None = None) -> Any:
    address = HOSTS[server.node_id][0]
    async with await KafkaConnection.connect(address, server.bound_port(), "test") as connection:
        topics = None if topic is None else (MetadataRequestTopic(name=topic),)
        request = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
        return await connection.request(request, METADATA_VERSION)


async def wait_for_metadata(server: KafkaServer, topic: str | None, ready: Any) -> Any:
    """Metadata once `ready(response)` holds (ZooKeeper's watches arrive when they do)."""
    response = None
    with trio.move_on_after(WAIT_S):
        while True:
            response = await metadata(server, topic)
            if ready(response):
                return response
            await trio.sleep(0.1)
    raise AssertionError(f"broker {server.node_id} after {WAIT_S} s: {response}")


def bootstrap(server: KafkaServer) -> str:
    return f"{HOSTS[server.node_id][0]}:{server.bound_port()}"


def create_topic(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])
    futures[topic].result(timeout=WAIT_S)


def produce(servers: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(WAIT_S) == 0


def consume(servers: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"g-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S  # bounded in time, whatever the count
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                if len(values) >= count:
                    break
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            values.append(value)
    finally:
        consumer.close()
    return values


async def test_three_hosts_form_one_cluster_with_replicated_partitions_and_failover(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    async with AsyncExitStack() as stack:
        servers = {
            node_id: await stack.enter_async_context(
                running_host(
                    tmp_path, node_id, zookeeper_connect, {"default.replication.factor": "3"}
                )
            )
            for node_id in HOSTS
        }
        # Every broker lists all three, with racks, and the one controller.
        controllers = set()
        for server in servers.values():
            response = await wait_for_metadata(
                server, None, lambda r: len(r.brokers) == 3 and r.controller_id >= 0
            )
            assert {(b.node_id, b.host, b.rack) for b in response.brokers} == {
                (node_id, address, rack) for node_id, (address, rack) in HOSTS.items()
            }
            assert {b.port for b in response.brokers} == {s.bound_port() for s in servers.values()}
            controllers.add(response.controller_id)
        assert len(controllers) == 1 and controllers <= set(HOSTS)

        # A topic with replication factor 3, created through one broker by a real client.
        topic = "replicated"
        await trio.to_thread.run_sync(create_topic, bootstrap(servers[1]), topic)
        for server in servers.values():
            response = await wait_for_metadata(
                server, topic, lambda r: all(p.leader_id >= 0 for p in r.topics[0].partitions)
            )
            partitions = {p.partition_index: p for p in response.topics[0].partitions}
            assert sorted(partitions) == [0, 1, 2]
            for p in partitions.values():
                assert sorted(p.replica_nodes) == [1, 2, 3]  # one per rack
                assert p.leader_id == p.replica_nodes[0]  # the preferred replica leads
                assert sorted(p.isr_nodes) == [1, 2, 3]
                assert p.leader_epoch == 0
        # Each partition has a different preferred leader (placement spreads them).
        assert {p.leader_id for p in partitions.values()} == {1, 2, 3}

        # A topic auto-created by a Metadata request takes default.replication.factor.
        address, port = HOSTS[1][0], servers[1].bound_port()
        async with await KafkaConnection.connect(address, port, "test") as connection:
            request = MetadataRequest(
                topics=(MetadataRequestTopic(name="auto"),), allow_auto_topic_creation=True
            )
            await connection.request(request, METADATA_VERSION)
        response = await wait_for_metadata(
            servers[2], "auto", lambda r: r.topics[0].error_code == 0 and r.topics[0].partitions
        )
        assert [sorted(p.replica_nodes) for p in response.topics[0].partitions] == [[1, 2, 3]]

        # Produce to partition 0's leader and consume back, bootstrapped from another broker.
        leader = partitions[0].leader_id
        other = next(n for n in HOSTS if n != leader)
        values = [f"record-{i}".encode() for i in range(20)]
        await trio.to_thread.run_sync(produce, bootstrap(servers[other]), topic, values)
        consumed = await trio.to_thread.run_sync(consume, bootstrap(servers[other]), topic, 20)
        assert consumed == values
        # The followers' fetchers copy them into their own logs, batch for batch.
        leader_log = servers[leader].log_manager.partition(topic, 0)
        assert leader_log is not None and leader_log.log_end_offset == len(values)
        leader_batches = bytes((await leader_log.read(0, 1 << 20)).records)
        for node_id in set(HOSTS) - {leader}:
            follower_logs = servers[node_id].log_manager
            assert isinstance(follower_logs, ZooKeeperLogManager)
            follower_log = follower_logs.replica_log(topic, 0)
            assert follower_log is not None
            with trio.fail_after(WAIT_S):
                while follower_log.log_end_offset < len(values):  # noqa: ASYNC110 - a fetcher's progress
                    await trio.sleep(0.05)
            assert bytes((await follower_log.read(0, 1 << 20)).records) == leader_batches

        # KIP-951: a Produce v10 sent to a follower is refused with the leader named, and
        # the leader's endpoint on this listener, so a client retries there at once.
        async with await KafkaConnection.connect(
            HOSTS[other][0], servers[other].bound_port(), "test"
        ) as connection:
            refused = await connection.request(produce_request(topic, {0: batch([b"x"])}), 10)
        answer = refused.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (leader, 0)
        assert [(e.node_id, e.host, e.port, e.rack) for e in refused.node_endpoints] == [
            (leader, HOSTS[leader][0], servers[leader].bound_port(), HOSTS[leader][1])
        ]

        # The leader's broker stops: the controller elects another ISR member, epoch 1.
        servers[leader].shutdown()
        with trio.fail_after(WAIT_S):
            await servers[leader].stopped.wait()
        survivor = servers[other]
        response = await wait_for_metadata(
            survivor,
            topic,
            lambda r: r.topics[0].partitions[0].leader_id not in (-1, leader),
        )
        moved = response.topics[0].partitions[0]
        assert moved.leader_id in set(HOSTS) - {leader}
        assert moved.leader_epoch == 1
        assert leader not in moved.isr_nodes
        assert sorted(moved.replica_nodes) == [1, 2, 3]
        assert {b.node_id for b in response.brokers} == set(HOSTS) - {leader}
        # The new leader serves what the old one acknowledged, and takes new records.
        more = [b"after-failover"]
        await trio.to_thread.run_sync(produce, bootstrap(survivor), topic, more)
        consumed = await trio.to_thread.run_sync(consume, bootstrap(survivor), topic, 21)
        assert consumed == values + more


def test_nothing_below_the_composition_root_imports_the_hosts_package() -> None:
    hosts = BROKER / "hosts"
    outside = (
        p for p in BROKER.rglob("*.py") if p != COMPOSITION_ROOT and not p.is_relative_to(hosts)
    )
    assert importers_of("broker.hosts", outside) == []


async def test_broker_serve_with_zookeeper_connect_is_deployed_as_a_host_among_hosts(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    """The composition root's choice: racks come only from ZooKeeper's registrations."""
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.2:0",
        "node.id": "7",
        "broker.rack": "rack-z",
        "zookeeper.connect": zookeeper_connect,
    }
    with broker_process(tmp_path / "serve", overrides) as broker:
        async with await KafkaConnection.connect("127.0.0.2", broker.port, "test") as connection:
            request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
            with trio.fail_after(WAIT_S):
                while not (response := await connection.request(request, METADATA_VERSION)).brokers:  # noqa: ASYNC110 - registered when it is
                    await trio.sleep(0.1)
    assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (7, "127.0.0.2", broker.port, "rack-z")
    ]
    assert response.controller_id in (-1, 7)
