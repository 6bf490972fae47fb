"""Stray logs (Kafka 2.x): a broker down while its topic was deleted, or while its replica
was reassigned away, finds those partitions' logs at start-up and deletes them once
ZooKeeper's view shows they are no longer its replicas; the logs it still hosts stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from confluent_kafka.admin import AdminClient, NewTopic

from tests.hosts.test_hosts_admin import administer, hosts_logs, reassignment, until
from tests.hosts.test_hosts_cluster import (
    bootstrap,
    running_host,
    wait_for_metadata,
)

GONE, MOVED, KEPT = "gone", "moved-away", "kept"


async def test_logs_no_longer_assigned_while_a_broker_was_down_are_deleted_at_its_start(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    settings = {"auto.leader.rebalance.enable": "false", "controlled.shutdown.enable": "false"}
    async with running_host(tmp_path, 1, zookeeper_connect, settings) as first:

        def create(admin: AdminClient) -> dict[Any, Any]:
            return admin.create_topics(
                [
                    NewTopic(name, num_partitions=1, replication_factor=2)
                    for name in (GONE, MOVED, KEPT)
                ]
            )

        async with running_host(tmp_path, 2, zookeeper_connect, settings) as second:
            await wait_for_metadata(first, None, lambda r: len(r.brokers) == 2)
            await trio.to_thread.run_sync(administer, bootstrap(first), create)
            logs = hosts_logs(second)
            await until(
                lambda: all(logs.replica_log(t, 0) is not None for t in (GONE, MOVED, KEPT))
            )
            directories = {t: logs.replica_log(t, 0).directory for t in (GONE, MOVED, KEPT)}  # type: ignore[union-attr]

        # Broker 2 is down: one topic deleted, another moved to broker 1 alone.
        await trio.to_thread.run_sync(
            administer, bootstrap(first), lambda admin: admin.delete_topics([GONE])
        )
        assert await reassignment(first, (1,), MOVED) == (0, None)
        await wait_for_metadata(
            first, MOVED, lambda r: list(r.topics[0].partitions[0].replica_nodes) == [1]
        )
        assert all(d.is_dir() for d in directories.values())

        async with running_host(tmp_path, 2, zookeeper_connect, settings) as second:
            logs = hosts_logs(second)
            await until(lambda: not directories[GONE].exists() and not directories[MOVED].exists())
            await until(lambda: logs.replica_log(KEPT, 0) is not None)
            assert directories[KEPT].is_dir()
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
