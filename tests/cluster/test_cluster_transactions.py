"""Transactions across the processes of a cluster, with confluent-kafka (librdkafka).

The transactional id, the group and the partitions are chosen so that their
coordinators and leaders are different processes: markers travel between
processes (WriteTxnMarkers over the private channel), and transactional offsets
wait on the group's process for the marker the transaction's process sends.
Every test starts its own cluster: one kills a process. Requests for an id sent to
a process that does not coordinate it answer NOT_COORDINATOR, as Kafka's do.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import trio
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from broker.client.connection import KafkaConnection
from broker.cluster.placement import coordinator_shard
from broker.handlers.group_handlers import COORDINATOR_TYPE_TRANSACTION
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
)
from broker.transaction.marker_router import marker_request
from tests.cluster.test_supervisor import child_pids, wait_until
from tests.integration.broker_harness import start_broker_process, stop_broker_process
from tests.interop.kafka_clients import admin, consumer_settings, create_topic
from tests.interop.txn_helpers import (
    end_offsets,
    produce_values,
    read_to_end,
    transactional_producer,
)

PROCESSES = 3
BASE_NODE = 1
CLUSTER = {
    "process.count": str(PROCESSES),
    "node.id": str(BASE_NODE),
    "num.network.threads": "1",
    "num.io.threads": "2",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
}


def name_on_shard(prefix: str, shard: int) -> str:
    """A transactional id or group id that the process with this index coordinates."""
    for i in range(10_000):
        name = f"{prefix}-{i}"
        if coordinator_shard(name, PROCESSES) == shard:
            return name
    raise AssertionError("no name found")


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    metadata = admin(bootstrap).list_topics(topic, timeout=10)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def test_a_transaction_over_partitions_led_by_three_processes_commits_and_aborts(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, "spread", 3)
        assert sorted(partition_leaders(bootstrap, "spread").values()) == [1, 2, 3]
        producer = transactional_producer(bootstrap, name_on_shard("tid", 0))
        committed = [b"c%d" % i for i in range(30)]
        aborted = [b"a%d" % i for i in range(30)]
        producer.begin_transaction()
        produce_values(producer, "spread", committed, 3)
        assert read_to_end(bootstrap, "spread", 3, "read_committed") == []
        producer.commit_transaction(30)
        producer.begin_transaction()
        produce_values(producer, "spread", aborted, 3)
        producer.abort_transaction(30)
        assert sorted(read_to_end(bootstrap, "spread", 3, "read_committed")) == sorted(committed)
        assert sorted(read_to_end(bootstrap, "spread", 3, "read_uncommitted")) == sorted(
            committed + aborted
        )
        # 60 records and 2 markers per partition, every marker written: nothing is open.
        assert end_offsets(bootstrap, "spread", 3, "read_committed") == [22, 22, 22]
    finally:
        assert stop_broker_process(cluster) == 0


def test_offsets_sent_to_a_group_coordinated_by_another_process_appear_only_on_commit(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    tid, group = name_on_shard("tid", 0), name_on_shard("group", 1)
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, "source", 1)
        create_topic(bootstrap, "sink", 3)
        settings = consumer_settings(bootstrap, **{"group.id": group})
        stable = Consumer({**settings, "isolation.level": "read_committed"})
        plain = Consumer({**settings, "isolation.level": "read_uncommitted"})
        producer = transactional_producer(bootstrap, tid)

        def committed(consumer: Consumer) -> int:
            return int(consumer.committed([TopicPartition("source", 0)], timeout=10)[0].offset)

        def send_offset(offset: int) -> None:
            producer.begin_transaction()
            produce_values(producer, "sink", [b"v%d" % offset], 3)
            producer.send_offsets_to_transaction(
                [TopicPartition("source", 0, offset)], stable.consumer_group_metadata(), 20
            )

        try:
            send_offset(5)
            # Pending on the group's process: unstable for require_stable, unset otherwise.
            try:
                stable.committed([TopicPartition("source", 0)], timeout=2)
                raise AssertionError("a pending transactional offset was reported stable")
            except KafkaException:
                pass
            assert committed(plain) < 0
            producer.abort_transaction(30)
            assert committed(stable) < 0
            send_offset(7)
            producer.commit_transaction(30)
            assert committed(stable) == 7
            assert committed(plain) == 7
        finally:
            stable.close()
            plain.close()
        assert read_to_end(bootstrap, "sink", 3, "read_committed") == [b"v7"]
    finally:
        assert stop_broker_process(cluster) == 0


def test_a_leader_killed_with_markers_pending_gets_them_after_its_restart(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, "crash", 3)
        leaders = partition_leaders(bootstrap, "crash")
        # The transaction's coordinator is process 0 (node 1); partition 2's leader,
        # another process, is killed before the commit's markers can reach it.
        victim_node = leaders[2]
        assert victim_node != BASE_NODE
        producer = transactional_producer(bootstrap, name_on_shard("tid", 0))
        values = [b"r%d" % i for i in range(30)]
        producer.begin_transaction()
        produce_values(producer, "crash", values, 3)
        assert read_to_end(bootstrap, "crash", 3, "read_committed") == []
        victim = child_pids(cluster.process.pid)[victim_node - BASE_NODE]
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: child_pids(cluster.process.pid).get(victim_node - BASE_NODE) != victim)

        errors: list[BaseException] = []

        def commit() -> None:
            try:
                producer.commit_transaction(60)
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        committer = threading.Thread(target=commit)
        committer.start()
        committer.join(90)
        assert not committer.is_alive()
        assert errors == []
        # Partition 2 was recovered by the restarted process and then got its marker.
        assert sorted(read_to_end(cluster.bootstrap, "crash", 3, "read_committed")) == sorted(
            values
        )
        assert end_offsets(cluster.bootstrap, "crash", 3, "read_committed") == [11, 11, 11]
        assert "markers for producer" in cluster.log_text()
    finally:
        assert stop_broker_process(cluster) == 0


async def test_transactional_ids_are_coordinated_by_the_process_their_hash_names(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        tid = "some-transactional-id"
        owner = BASE_NODE + coordinator_shard(tid, PROCESSES)
        for node, port in cluster.node_ports().items():
            async with await KafkaConnection.connect("127.0.0.1", port) as connection:
                found = await connection.request(
                    FindCoordinatorRequest(key=tid, key_type=COORDINATOR_TYPE_TRANSACTION), 2
                )
                assert (found.error_code, found.node_id) == (ErrorCode.NONE, owner)
                init = await connection.request(
                    InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10_000), 4
                )
                described = await connection.request(
                    DescribeTransactionsRequest(transactional_ids=(tid,)), 0
                )
                expected = ErrorCode.NONE if node == owner else ErrorCode.NOT_COORDINATOR
                assert init.error_code == expected
                assert described.transaction_states[0].error_code == expected
    finally:
        assert stop_broker_process(cluster) == 0


async def test_markers_cross_processes_with_acls_on_that_deny_clients_cluster_action(
    tmp_path: Path,
) -> None:
    settings = {
        **CLUSTER,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    cluster = start_broker_process(tmp_path / "data", settings)
    try:
        bootstrap = cluster.bootstrap
        deny = AclBinding(
            ResourceType.BROKER,  # librdkafka's name for the CLUSTER resource
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            "User:*",
            "*",
            AclOperation.CLUSTER_ACTION,
            AclPermissionType.DENY,
        )
        client = admin(bootstrap)  # kept alive until the future resolves
        for future in client.create_acls([deny], request_timeout=15).values():
            assert future.result(timeout=20) is None
        create_topic(bootstrap, "guarded", 3)
        # A client may not write markers (every process applies the new ACL within its
        # poll interval)...
        request = marker_request(1, 0, True, [("no-such-topic", 0)], [])
        for port in cluster.node_ports().values():
            async with await KafkaConnection.connect("127.0.0.1", port) as connection:
                with trio.move_on_after(10):
                    while True:
                        answer = await connection.request(request, 1)
                        errors = {
                            p.error_code for t in answer.markers[0].topics for p in t.partitions
                        }
                        if errors != {ErrorCode.NONE}:
                            break
                        await trio.sleep(0.05)
                assert errors == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
        # ... while the processes write each other's over their private channel.
        producer = transactional_producer(bootstrap, name_on_shard("tid", 0))
        producer.begin_transaction()
        produce_values(producer, "guarded", [b"a", b"b", b"c"], 3)
        producer.commit_transaction(30)
        assert sorted(read_to_end(bootstrap, "guarded", 3, "read_committed")) == [b"a", b"b", b"c"]
        assert end_offsets(bootstrap, "guarded", 3, "read_committed") == [2, 2, 2]
    finally:
        assert stop_broker_process(cluster) == 0
