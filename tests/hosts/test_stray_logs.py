"""Stray logs (Kafka 2.x): a broker down while its topic was deleted, or while its replica
was reassigned away, or while its topic was deleted and created again with the same name,
finds those partitions' logs at start-up and deletes them once ZooKeeper's view shows
they are no longer its replicas (the last by the topic id of `partition.metadata`, as
Kafka 2.8+); the logs it still hosts stay, a dir without the file adopted."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import trio
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from broker.hosts.partition_state_view import encode_topic_id
from broker.log.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from tests.hosts.test_hosts_admin import administer, hosts_logs, reassignment, until
from tests.hosts.test_hosts_cluster import (
    WAIT_S,
    bootstrap,
    running_host,
    wait_for_metadata,
)

GONE, MOVED, KEPT, RECREATED = "gone", "moved-away", "kept", "recreated"


def create_topic_in_zookeeper(zookeeper: str, topic: str, replicas: list[int]) -> uuid.UUID:
    """As Kafka 2.8's `kafka-topics.sh --zookeeper` (AdminZkClient) creates one: the
    config, then the assignment with a new topic id, once any earlier deletion is done;
    it can place a replica on a broker that is down."""
    topic_id = uuid.uuid4()
    client = KazooClient(hosts=zookeeper)
    client.start(WAIT_S)
    try:
        for _ in range(int(WAIT_S * 10)):  # a worker thread: kazoo blocks
            if client.exists(f"/admin/delete_topics/{topic}") is None:
                break
            time.sleep(0.1)
        assignment = {
            "version": 3,
            "partitions": {"0": replicas},
            "adding_replicas": {},
            "removing_replicas": {},
            "topic_id": encode_topic_id(topic_id),
        }
        client.create(f"/config/topics/{topic}", b'{"version":1,"config":{}}', makepath=True)
        client.create(f"/brokers/topics/{topic}", json.dumps(assignment).encode())
    finally:
        client.stop()
        client.close()
    return topic_id


async def test_logs_no_longer_assigned_while_a_broker_was_down_are_deleted_at_its_start(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    settings = {"auto.leader.rebalance.enable": "false", "controlled.shutdown.enable": "false"}
    async with running_host(tmp_path, 1, zookeeper_connect, settings) as first:

        def create(admin: AdminClient) -> dict[Any, Any]:
            return admin.create_topics(
                [
                    NewTopic(name, num_partitions=1, replication_factor=2)
                    for name in (GONE, MOVED, KEPT, RECREATED)
                ]
            )

        async with running_host(tmp_path, 2, zookeeper_connect, settings) as second:
            await wait_for_metadata(first, None, lambda r: len(r.brokers) == 2)
            await trio.to_thread.run_sync(administer, bootstrap(first), create)
            logs = hosts_logs(second)
            names = (GONE, MOVED, KEPT, RECREATED)
            await until(lambda: all(logs.replica_log(t, 0) is not None for t in names))
            directories = {t: logs.replica_log(t, 0).directory for t in names}  # type: ignore[union-attr]
            kept_id = logs.topics()[KEPT].topic_id
            assert read_partition_metadata(directories[KEPT]) == kept_id

        # Broker 2 is down: one topic deleted, another moved to broker 1 alone, a third
        # deleted and created again on both brokers.
        await trio.to_thread.run_sync(
            administer, bootstrap(first), lambda admin: admin.delete_topics([GONE, RECREATED])
        )
        assert await reassignment(first, (1,), MOVED) == (0, None)
        await wait_for_metadata(
            first, MOVED, lambda r: list(r.topics[0].partitions[0].replica_nodes) == [1]
        )
        new_id = await trio.to_thread.run_sync(
            create_topic_in_zookeeper, zookeeper_connect, RECREATED, [1, 2]
        )
        await until(lambda: hosts_logs(first).replica_log(RECREATED, 0) is not None)
        assert all(d.is_dir() for d in directories.values())
        (directories[RECREATED] / "the-old-topics").touch()
        (directories[KEPT] / PARTITION_METADATA_FILE).unlink()  # as a log from before 2.8

        async with running_host(tmp_path, 2, zookeeper_connect, settings) as second:
            logs = hosts_logs(second)
            await until(lambda: not directories[GONE].exists() and not directories[MOVED].exists())
            await until(lambda: logs.replica_log(KEPT, 0) is not None)
            assert directories[KEPT].is_dir()
            assert read_partition_metadata(directories[KEPT]) == kept_id  # adopted
            await until(lambda: logs.replica_log(RECREATED, 0) is not None)
            assert not (directories[RECREATED] / "the-old-topics").exists()
            assert read_partition_metadata(directories[RECREATED]) == new_id
            assert logs.replica_log(GONE, 0) is None and logs.replica_log(MOVED, 0) is None
            leftovers = [
                p.name
                for p in directories[GONE].parent.iterdir()
                if p.name.startswith((GONE, MOVED))
            ]
            assert leftovers == []

    # Pointed at an empty ZooKeeper (another chroot), the broker keeps every log it has:
    # no topic at all there means the wrong ZooKeeper far more likely than all deleted.
    elsewhere = f"{zookeeper_connect}-elsewhere"
    async with running_host(tmp_path, 2, elsewhere, settings) as alone:

        def create_other(admin: AdminClient) -> dict[Any, Any]:
            return admin.create_topics([NewTopic("other", num_partitions=1, replication_factor=1)])

        await wait_for_metadata(alone, None, lambda r: r.controller_id == 2)
        await trio.to_thread.run_sync(administer, bootstrap(alone), create_other)
        assert hosts_logs(alone).replica_log("other", 0) is not None
        assert directories[KEPT].is_dir()
