"""A reassignment under Kafka's replication throttle, on two hosts and a real ZooKeeper:
the rates set as dynamic broker configs and the throttled replicas as topic configs by
the test client's `reassignments alter --throttle` (as kafka-reassign-partitions sets
them, a second throttled move of the topic keeping the first one's lists); the new
replica copies the log at about the rate, completes once the rates are raised through
confluent-kafka's AdminClient, and `reassignments verify` lifts every throttle once
nothing is in progress (as kafka-reassign-partitions --verify)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.server import KafkaServer
from tests.client.cli_runner import run_cli
from tests.hosts.test_hosts_admin import administer, hosts_logs, ongoing_reassignments, until
from tests.hosts.test_hosts_cluster import WAIT_S, bootstrap, running_host, wait_for_metadata

TOPIC = "throttled"
RECORDS = 60
VALUE_BYTES = 10_000
RATE = 20_000  # bytes/s: the 600 KB log would take about 30 s
FETCH_MAX_BYTES = 100_000  # a fetch brings ten 10 KB batches: the throttle's granularity
WINDOWS = 2  # replication.quota.window.num: the rate's first burst is one window's worth
SETTINGS = {
    "replication.quota.window.num": str(WINDOWS),
    "replication.quota.window.size.seconds": "1",
    "replica.fetch.max.bytes": str(FETCH_MAX_BYTES),
    "auto.leader.rebalance.enable": "false",
}


def produce_batches(servers: str) -> None:
    """One record per batch, so that a fetch of `FETCH_MAX_BYTES` carries ten."""
    producer = Producer(
        {"bootstrap.servers": servers, "acks": "all", "linger.ms": 0, "batch.size": 12_000}
    )
    for i in range(RECORDS):
        producer.produce(TOPIC, bytes([i % 256]) * VALUE_BYTES, partition=0)
    assert producer.flush(WAIT_S) == 0


def broker_rates(node_id: int, op: AlterConfigOpType, rate: int = RATE) -> Any:
    def call(admin: AdminClient) -> dict[Any, Any]:
        entries = [
            ConfigEntry(name, str(rate), incremental_operation=op)
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
        ]
        resource = ConfigResource(ResourceType.BROKER, str(node_id), incremental_configs=entries)
        return admin.incremental_alter_configs([resource])

    return call


def throttle_bounded(server: KafkaServer) -> bool:
    deployment = server.deployment
    assert isinstance(deployment, ZooKeeperDeployment)
    return deployment.throttles.leader.bounded or deployment.throttles.follower.bounded


def topic_configs(server: KafkaServer) -> dict[str, str]:
    topic = hosts_logs(server).topic(TOPIC)
    return {} if topic is None else dict(topic.configs())


async def cli(server: KafkaServer, *command: str) -> tuple[int, str]:
    done = await trio.to_thread.run_sync(run_cli, [*command, "-b", bootstrap(server)])
    return done.code, done.out.decode() + done.err


def copied(server: KafkaServer) -> int:
    log = hosts_logs(server).replica_log(TOPIC, 0)
    return 0 if log is None else log.log_end_offset


async def test_a_throttled_reassignment_copies_at_about_the_rate_and_completes_once_lifted(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    async with AsyncExitStack() as stack:
        servers = {
            node_id: await stack.enter_async_context(
                running_host(tmp_path, node_id, zookeeper_connect, SETTINGS)
            )
            for node_id in (1, 2)
        }
        await wait_for_metadata(servers[1], None, lambda r: len(r.brokers) == 2)

        def create(admin: AdminClient) -> dict[Any, Any]:
            return admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])

        await trio.to_thread.run_sync(administer, bootstrap(servers[1]), create)
        created = await wait_for_metadata(
            servers[1], TOPIC, lambda r: all(p.leader_id > 0 for p in r.topics[0].partitions)
        )
        leader, leader_1 = (
            p.leader_id
            for p in sorted(created.topics[0].partitions, key=lambda p: p.partition_index)
        )
        follower, follower_1 = 3 - leader, 3 - leader_1
        await trio.to_thread.run_sync(produce_batches, bootstrap(servers[leader]))

        # The move, throttled as kafka-reassign-partitions --throttle does it (the test
        # client's option: topic lists first, the rates on both brokers, then the move).
        move = f"{TOPIC}:0={leader},{follower}"
        command = ["reassignments", "alter", move, "--throttle", str(RATE)]
        moved = await trio.to_thread.run_sync(run_cli, [*command, "-b", bootstrap(servers[1])])
        assert moved.code == 0, moved.err
        lists = {
            "leader.replication.throttled.replicas": f"0:{leader}",
            "follower.replication.throttled.replicas": f"0:{follower}",
        }
        for server in servers.values():
            logs = hosts_logs(server)
            await until(
                lambda logs=logs: (  # type: ignore[misc]
                    (topic := logs.topic(TOPIC)) is not None
                    and lists.items() <= topic.configs().items()
                )
            )
        started = trio.current_time()
        record_bytes = VALUE_BYTES + 80
        # Bounded, loosely: the rate over the time passed plus the first window's burst
        # and the fetch in flight on each side (unthrottled, the whole log is copied
        # within the first 0.2 s); and the copy moves.
        while (elapsed := trio.current_time() - started) < 3.0:
            allowed = RATE * (elapsed + WINDOWS) + 2 * FETCH_MAX_BYTES
            assert copied(servers[follower]) * record_bytes <= allowed, elapsed
            await trio.sleep(0.2)
        throttled_copy = copied(servers[follower])
        assert 0 < throttled_copy < RECORDS
        assert await ongoing_reassignments(servers[leader]) != ()

        # A second throttled move of the topic: its lists cover both moves (Kafka's tool
        # computes them over the reassignments ongoing), not the second alone.
        second = f"{TOPIC}:1={leader_1},{follower_1}"
        code, out = await cli(servers[1], "reassignments", "alter", second, "--throttle", str(RATE))
        assert code == 0, out
        merged = {
            "leader.replication.throttled.replicas": f"0:{leader},1:{leader_1}",
            "follower.replication.throttled.replicas": f"0:{follower},1:{follower_1}",
        }
        for server in servers.values():
            await until(lambda server=server: merged.items() <= topic_configs(server).items())  # type: ignore[misc]
        code, out = await cli(servers[1], "reassignments", "verify", move, second)
        assert code == 1 and f"{TOPIC}-0\tin progress" in out, out
        assert merged.items() <= topic_configs(servers[1]).items()  # kept while in progress
        assert all(throttle_bounded(server) for server in servers.values())

        # Raised: the copy completes, the new replica joins the ISR, nothing is ongoing.
        for node_id, server in servers.items():
            call = broker_rates(node_id, AlterConfigOpType.SET, 1_000_000_000)
            await trio.to_thread.run_sync(administer, bootstrap(server), call)
        await wait_for_metadata(
            servers[leader],
            TOPIC,
            lambda r: sorted(r.topics[0].partitions[0].isr_nodes) == [1, 2],
        )
        await until(lambda: copied(servers[follower]) == RECORDS)
        with trio.fail_after(WAIT_S):
            while await ongoing_reassignments(servers[leader]) != ():  # noqa: ASYNC110 - watches
                await trio.sleep(0.1)

        # Verified complete: the lists and both brokers' rates are lifted.
        code, out = await cli(servers[1], "reassignments", "verify", move, second)
        assert code == 0 and f"{TOPIC}-0\tcomplete" in out and "throttles lifted" in out, out
        for server in servers.values():
            await until(lambda server=server: not throttle_bounded(server))  # type: ignore[misc]
            await until(
                lambda server=server: (
                    not any(  # type: ignore[misc]
                        key in topic_configs(server) for key in merged
                    )
                )
            )
        print(f"throttled copy: {throttled_copy} of {RECORDS} records in 3 s at {RATE} B/s")
