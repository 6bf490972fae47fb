"""A cluster of three processes as Kafka clients see it (confluent-kafka / librdkafka).

Every test starts its own cluster: some kill or restart processes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from broker.client.connection import KafkaConnection
from broker.cluster.placement import coordinator_shard
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FindCoordinatorRequest, OffsetFetchRequest
from tests.cluster.test_supervisor import child_pids, wait_until
from tests.integration.broker_harness import start_broker_process, stop_broker_process
from tests.interop.kafka_clients import (
    admin,
    assert_librdkafka_reads,
    confluent_produce,
    create_topic,
    make_messages,
    rdkafka_settings,
)

CLUSTER = {
    "process.count": "3",
    "num.network.threads": "1",
    "num.io.threads": "2",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
}


def test_metadata_lists_every_process_and_leaders_are_spread(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        create_topic(cluster.bootstrap, "spread", 6)
        ports = cluster.node_ports()
        # Any process answers with the whole cluster.
        for port in ports.values():
            metadata = admin(f"127.0.0.1:{port}").list_topics(timeout=10)
            assert {b.id: b.port for b in metadata.brokers.values()} == ports
            leaders = Counter(p.leader for p in metadata.topics["spread"].partitions.values())
            assert leaders == Counter(dict.fromkeys(ports, 2))
    finally:
        assert stop_broker_process(cluster) == 0


def test_produce_and_consume_go_to_each_partitions_leader(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        create_topic(cluster.bootstrap, "routed", 6)
        messages = make_messages(600, 6)
        reports = confluent_produce(cluster.bootstrap, "routed", messages, acks="all")
        assert sorted({p for p, _ in reports}) == list(range(6))
        assert_librdkafka_reads(cluster.bootstrap, "routed", 6, messages)
        # Each partition directory was written by its leader only.
        for partition in range(6):
            assert (tmp_path / "data" / f"routed-{partition}").is_dir()
    finally:
        assert stop_broker_process(cluster) == 0


def group_consume(bootstrap: str, group: str, topic: str, count: int) -> int:
    consumer = Consumer(
        rdkafka_settings(
            bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
        )
    )
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                if msg.error() is None:
                    got += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer(rdkafka_settings(bootstrap, group_id=group))
    try:
        offsets = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=15
        )
    finally:
        consumer.close()
    return [tp.offset for tp in offsets]


def test_groups_spread_over_processes_and_offsets_survive_a_change_of_count(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    groups = [f"group-{i}" for i in range(6)]
    assert len({coordinator_shard(g, 3) for g in groups}) == 3
    cluster = start_broker_process(data, CLUSTER)
    try:
        create_topic(cluster.bootstrap, "grouped", 3)
        confluent_produce(cluster.bootstrap, "grouped", make_messages(90, 3))
        for group in groups:
            assert group_consume(cluster.bootstrap, group, "grouped", 90) == 90
        coordinators: Counter[int] = Counter()
        client = admin(cluster.bootstrap)
        for group, future in client.describe_consumer_groups(groups).items():
            coordinators[future.result(timeout=15).coordinator.id] += 1
            del group
        assert len(coordinators) == 3
    finally:
        assert stop_broker_process(cluster) == 0
    # Two processes, then one: the committed offsets follow their groups.
    for count in ("2", "1"):
        restarted = start_broker_process(data, {**CLUSTER, "process.count": count})
        try:
            for group in groups:
                assert committed(restarted.bootstrap, group, "grouped", 3) == [30, 30, 30]
        finally:
            assert stop_broker_process(restarted) == 0


def test_a_single_process_data_dir_is_adopted_by_a_cluster_and_back_without_loss(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    single = start_broker_process(data, {"auto.create.topics.enable": "false"})
    try:
        create_topic(single.bootstrap, "before", 4)
        first = make_messages(200, 4, seed=1)
        confluent_produce(single.bootstrap, "before", first)
    finally:
        assert stop_broker_process(single) == 0
    cluster = start_broker_process(data, CLUSTER)
    try:
        assert_librdkafka_reads(cluster.bootstrap, "before", 4, first)
        second = make_messages(200, 4, seed=2)
        confluent_produce(cluster.bootstrap, "before", second)
        create_topic(cluster.bootstrap, "during", 2)
    finally:
        assert stop_broker_process(cluster) == 0
    single = start_broker_process(data, {"auto.create.topics.enable": "false"})
    try:
        assert_librdkafka_reads(single.bootstrap, "before", 4, [*first, *second])
        topics = admin(single.bootstrap).list_topics(timeout=10).topics
        assert "during" in topics
    finally:
        assert stop_broker_process(single) == 0


def test_a_process_killed_mid_produce_loses_nothing_acknowledged_with_acks_all(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        create_topic(cluster.bootstrap, "durable", 3)
        acknowledged: set[bytes] = set()
        failed: list[Any] = []
        producer = Producer(
            rdkafka_settings(
                cluster.bootstrap,
                acks="all",
                linger_ms=2,
                message_timeout_ms=30000,
                enable_idempotence=False,
            )
        )

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                acknowledged.add(msg.value())
            else:
                failed.append(err)

        killed = threading.Event()

        def kill_process_one() -> None:
            time.sleep(0.5)
            os.kill(child_pids(cluster.process.pid)[1], signal.SIGKILL)
            killed.set()

        killer = threading.Thread(target=kill_process_one)
        killer.start()
        sent = 0
        deadline = time.monotonic() + 20
        while (sent < 3000 or not killed.is_set()) and time.monotonic() < deadline:
            try:
                producer.produce(
                    "durable",
                    value=f"record-{sent}".encode(),
                    partition=sent % 3,
                    on_delivery=report,
                )
                sent += 1
            except BufferError:
                pass
            producer.poll(0.001)
        killer.join()
        assert producer.flush(40) == 0
        assert killed.is_set()
        wait_until(lambda: "exited with -9; restarting" in cluster.log_text())
        # Everything acknowledged is there once the killed process has recovered.
        consumer = Consumer(
            rdkafka_settings(cluster.bootstrap, group_id="check", enable_auto_commit=False)
        )
        consumer.assign([TopicPartition("durable", p, 0) for p in range(3)])
        read: set[bytes] = set()
        deadline = time.monotonic() + 40
        while not acknowledged <= read and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                value = msg.value()
                if msg.error() is None and value is not None:
                    read.add(value)
        consumer.close()
        assert acknowledged, "nothing was acknowledged"
        assert acknowledged <= read, f"{len(acknowledged - read)} acknowledged records lost"
    finally:
        assert stop_broker_process(cluster) == 0


async def test_group_requests_to_another_process_answer_not_coordinator(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        group = "some-group"
        coordinator = 1 + coordinator_shard(group, 3)
        for node, port in cluster.node_ports().items():
            async with await KafkaConnection.connect("127.0.0.1", port) as connection:
                found = await connection.request(FindCoordinatorRequest(key=group), 2)
                assert found.node_id == coordinator
                fetched = await connection.request(
                    OffsetFetchRequest(group_id=group, topics=None), 5
                )
                expected = ErrorCode.NONE if node == coordinator else ErrorCode.NOT_COORDINATOR
                assert fetched.error_code == expected
    finally:
        assert stop_broker_process(cluster) == 0
