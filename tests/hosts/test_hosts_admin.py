"""Topic administration on hosts coordinated through a real ZooKeeper, through a real
client: one cluster id from `/cluster/id`, topic configs followed by every broker,
partitions added with their replicas placed and led, and a topic deleted as Kafka 2.x
deletes it (its znodes and every replica's log gone)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kazoo.client import KazooClient

from broker.client.connection import KafkaConnection
from broker.coordination.cluster_id import InconsistentClusterId
from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.meta_properties import META_PROPERTIES
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    DescribeLogDirsRequest,
    ListPartitionReassignmentsRequest,
)
from broker.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from broker.server import KafkaServer
from tests.client.cli_runner import run_cli
from tests.hosts.test_hosts_cluster import (
    HOSTS,
    WAIT_S,
    bootstrap,
    consume,
    metadata,
    produce,
    running_host,
    wait_for_metadata,
)
from tests.integration.broker_harness import base_config

TOPIC = "administered"
MOVED = "moved"
LOG_DIRS_VERSION = 4


def znodes(zookeeper: str, *paths: str) -> dict[str, bytes | None]:
    client = KazooClient(hosts=zookeeper)
    client.start(WAIT_S)
    try:
        found = {}
        for path in paths:
            node = client.exists(path)
            found[path] = None if node is None else client.get(path)[0]
        return found
    finally:
        client.stop()
        client.close()


def administer(servers: str, call: Callable[[AdminClient], dict[Any, Any]]) -> None:
    admin = AdminClient({"bootstrap.servers": servers})  # alive until answered
    for future in call(admin).values():
        future.result(timeout=WAIT_S)


def describe_cluster(servers: str) -> Any:
    admin = AdminClient({"bootstrap.servers": servers})
    return admin.describe_cluster().result(timeout=WAIT_S)


def set_retention(admin: AdminClient) -> dict[Any, Any]:
    entry = ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[entry])
    return admin.incremental_alter_configs([resource])


async def until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(WAIT_S):
        while not condition():  # noqa: ASYNC110 - ZooKeeper's watches arrive when they do
            await trio.sleep(0.05)


def retention_is(logs: ZooKeeperLogManager, value: str) -> bool:
    topic = logs.topic(TOPIC)
    return topic is not None and topic.configs().get("retention.ms") == value


def holds_partition(logs: ZooKeeperLogManager, partition: int) -> bool:
    return logs.replica_log(TOPIC, partition) is not None


def hosts_logs(server: KafkaServer) -> ZooKeeperLogManager:
    assert isinstance(server.log_manager, ZooKeeperLogManager)
    return server.log_manager


async def reassignment(
    server: KafkaServer, replicas: tuple[int, ...] | None, topic: str = MOVED
) -> tuple[int, str | None]:
    partition = ReassignablePartition(partition_index=0, replicas=replicas)
    request = AlterPartitionReassignmentsRequest(
        topics=(ReassignableTopic(name=topic, partitions=(partition,)),)
    )
    async with await KafkaConnection.connect(
        HOSTS[server.node_id][0], server.bound_port(), "t"
    ) as connection:
        response = await connection.request(request, 0)
    (result,) = response.responses[0].partitions
    return result.error_code, result.error_message


async def ongoing_reassignments(server: KafkaServer) -> Any:
    async with await KafkaConnection.connect(
        HOSTS[server.node_id][0], server.bound_port(), "t"
    ) as connection:
        return (await connection.request(ListPartitionReassignmentsRequest(), 0)).topics


async def reassign_a_partition(servers: dict[int, KafkaServer], zookeeper: str) -> None:
    """A partition with replication factor 2 moved to the broker that had no replica: the
    new replica copies the log and joins the ISR, the old one is removed, its log deleted."""

    def create(admin: AdminClient) -> dict[Any, Any]:
        return admin.create_topics([NewTopic(MOVED, num_partitions=1, replication_factor=2)])

    await trio.to_thread.run_sync(administer, bootstrap(servers[1]), create)
    before = await wait_for_metadata(
        servers[1], MOVED, lambda r: len(r.topics[0].partitions[0].isr_nodes) == 2
    )
    old = tuple(before.topics[0].partitions[0].replica_nodes)
    (newcomer,) = set(HOSTS) - set(old)
    target = (old[1], newcomer)  # the leader (old[0]) leaves
    values = [f"moved-{i}".encode() for i in range(10)]
    await trio.to_thread.run_sync(produce, bootstrap(servers[1]), MOVED, values)
    leaving_log = hosts_logs(servers[old[0]]).replica_log(MOVED, 0)
    assert leaving_log is not None and leaving_log.log_end_offset == len(values)

    bad = await reassignment(servers[2], (old[1], 9))
    assert bad[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "9" in str(bad[1])
    assert (await reassignment(servers[2], None))[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    cancel = ["reassignments", "alter", "--cancel", f"{MOVED}:0", "-b", bootstrap(servers[3])]
    cancelled = await trio.to_thread.run_sync(run_cli, cancel)
    assert cancelled.code == 1 and b"NO_REASSIGNMENT_IN_PROGRESS" in cancelled.out
    assert await reassignment(servers[2], target) == (ErrorCode.NONE, None)
    for server in servers.values():
        after = await wait_for_metadata(
            server,
            MOVED,
            lambda r: (
                tuple(r.topics[0].partitions[0].replica_nodes) == target
                and tuple(sorted(r.topics[0].partitions[0].isr_nodes)) == tuple(sorted(target))
            ),
        )
        assert after.topics[0].partitions[0].leader_id == old[1]
        assert await ongoing_reassignments(server) == ()
    listed = await trio.to_thread.run_sync(
        run_cli, ["reassignments", "list", "-b", bootstrap(servers[1])]
    )
    assert (listed.code, listed.out) == (0, b"")
    moved_log = hosts_logs(servers[newcomer]).replica_log(MOVED, 0)
    assert moved_log is not None and moved_log.log_end_offset == len(values)
    await until(lambda: hosts_logs(servers[old[0]]).replica_log(MOVED, 0) is None)
    await until(lambda: not leaving_log.directory.exists())
    path = "/admin/reassign_partitions"
    assert await trio.to_thread.run_sync(znodes, zookeeper, path) == {path: None}
    consumed = await trio.to_thread.run_sync(consume, bootstrap(servers[newcomer]), MOVED, 10)
    assert consumed == values


async def test_hosts_share_a_cluster_id_and_alter_extend_and_delete_topics(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    async with AsyncExitStack() as stack:
        servers = {
            node_id: await stack.enter_async_context(
                running_host(tmp_path, node_id, zookeeper_connect)
            )
            for node_id in HOSTS
        }
        # One cluster id, the one the first broker wrote to /cluster/id in Kafka's JSON.
        stored = (await trio.to_thread.run_sync(znodes, zookeeper_connect, "/cluster/id"))[
            "/cluster/id"
        ]
        assert stored is not None
        document = json.loads(stored)
        assert document["version"] == "1"
        for server in servers.values():
            response = await wait_for_metadata(server, None, lambda r: len(r.brokers) == 3)
            assert response.cluster_id == document["id"]
            assert server.cluster_id == document["id"]
        servers_1 = bootstrap(servers[1])
        described = await trio.to_thread.run_sync(describe_cluster, bootstrap(servers[3]))
        assert described.cluster_id == document["id"]
        assert {node.id for node in described.nodes} == set(HOSTS)

        def create(admin: AdminClient) -> dict[Any, Any]:
            return admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=3)])

        await trio.to_thread.run_sync(administer, servers_1, create)

        # A config change through one broker is written to /config/topics and followed by all.
        await trio.to_thread.run_sync(administer, bootstrap(servers[2]), set_retention)
        for server in servers.values():
            await until(functools.partial(retention_is, hosts_logs(server), "123456"))
        config_path = f"/config/topics/{TOPIC}"
        config = (await trio.to_thread.run_sync(znodes, zookeeper_connect, config_path))[
            config_path
        ]
        assert config is not None and json.loads(config)["config"] == {"retention.ms": "123456"}

        # Two partitions added: placed over the three racks, led, a replica on every broker.
        def add_partitions(admin: AdminClient) -> dict[Any, Any]:
            return admin.create_partitions([NewPartitions(TOPIC, 4)])

        await trio.to_thread.run_sync(administer, bootstrap(servers[3]), add_partitions)
        for server in servers.values():
            response = await wait_for_metadata(
                server,
                TOPIC,
                lambda r: (
                    len(r.topics[0].partitions) == 4
                    and all(p.leader_id >= 0 for p in r.topics[0].partitions)
                ),
            )
            for p in response.topics[0].partitions:
                assert sorted(p.replica_nodes) == [1, 2, 3]
                assert p.leader_id == p.replica_nodes[0]
            logs = hosts_logs(server)
            await until(functools.partial(holds_partition, logs, 3))
        added = {p.partition_index: p for p in response.topics[0].partitions}
        assert {added[2].leader_id, added[3].leader_id} <= set(HOSTS)
        assert added[2].leader_id != added[3].leader_id  # placement goes on spreading them

        # DescribeLogDirs: every broker's dir holds a replica of each partition, led or not.
        for node_id, server in servers.items():
            address = HOSTS[node_id][0]
            async with await KafkaConnection.connect(address, server.bound_port(), "t") as conn:
                request = DescribeLogDirsRequest(topics=None)
                described = await conn.request(request, LOG_DIRS_VERSION)
            (result,) = described.results
            assert result.error_code == ErrorCode.NONE and result.total_bytes > 0
            assert Path(result.log_dir) == (tmp_path / f"host-{node_id}").resolve()
            (held,) = [t for t in result.topics if t.name == TOPIC]
            assert [p.partition_index for p in held.partitions] == [0, 1, 2, 3]
            assert all(p.offset_lag == 0 and p.partition_size >= 0 for p in held.partitions)

        # The test client: leader, replicas and ISR per partition; the log dirs.
        described = await trio.to_thread.run_sync(
            run_cli, ["topics", "describe", TOPIC, "-b", servers_1]
        )
        assert described.code == 0, described.err
        rows = [line for line in described.out.decode().splitlines() if "Leader:" in line]
        assert len(rows) == 4
        for row in rows:
            assert "Replicas: " in row and "Isr: " in row
            isr = row.split("Isr: ")[1].split("\t")[0]
            assert sorted(isr.split(",")) == ["1", "2", "3"]
        dirs = await trio.to_thread.run_sync(run_cli, ["log-dirs", TOPIC, "-b", servers_1])
        assert dirs.code == 0, dirs.err
        assert dirs.out.decode().count(f"\t{TOPIC}-") == 4

        await reassign_a_partition(servers, zookeeper_connect)

        # Deleted: the topic leaves every broker's Metadata, its logs and its znodes go.
        directories = [
            log.directory
            for server in servers.values()
            for p in range(4)
            if (log := hosts_logs(server).replica_log(TOPIC, p)) is not None
        ]
        assert len(directories) == 12 and all(d.is_dir() for d in directories)
        await trio.to_thread.run_sync(
            administer, bootstrap(servers[2]), lambda admin: admin.delete_topics([TOPIC])
        )
        for server in servers.values():
            response = await wait_for_metadata(
                server,
                TOPIC,
                lambda r: r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
            assert hosts_logs(server).replica_log(TOPIC, 0) is None
        await until(lambda: not any(d.exists() for d in directories))
        paths = (f"/brokers/topics/{TOPIC}", config_path, f"/admin/delete_topics/{TOPIC}")
        gone = await trio.to_thread.run_sync(znodes, zookeeper_connect, *paths)
        assert gone == dict.fromkeys(paths)
        # The name can be used again: a new topic, empty.
        await trio.to_thread.run_sync(administer, servers_1, create)
        response = await metadata(servers[1], TOPIC)
        assert len(response.topics[0].partitions) == 2

    # A broker whose meta.properties names another cluster does not start.
    data_dir = tmp_path / "elsewhere"
    data_dir.mkdir()
    (data_dir / META_PROPERTIES).write_text("version=1\ncluster.id=another-cluster\nnode.id=9\n")
    elsewhere = base_config(data_dir, {"node.id": "9", "zookeeper.connect": zookeeper_connect})
    with pytest.raises(InconsistentClusterId, match="doesn't match stored clusterId another"):
        ZooKeeperDeployment(elsewhere)
