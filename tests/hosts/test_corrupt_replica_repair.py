"""A corrupt batch in a replica's log is repaired from an in-sync replica (three brokers
on their own loopback addresses, a real ZooKeeper; docs/corrupt-data.md): a batch
destroyed in the leader's segment while it runs is found by a consumer's read, the
leader hands the partition to another in-sync replica and the consumer reads every
record intact; a batch destroyed in a stopped follower's segment is found by its
recovery; a batch whose body (not its header) is damaged in the leader's segment fails
the CRC the leader checks as it reads, and is repaired the same way. Each time the
damaged replica fetches the leader's copy and all three logs end byte for byte equal."""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from pathlib import Path

import trio

from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.log.log_manager import CLEAN_SHUTDOWN_FILE
from broker.metrics import Gauge, Meter
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import iter_batches
from broker.server import KafkaServer
from tests.hosts.test_hosts_cluster import (
    HOSTS,
    WAIT_S,
    bootstrap,
    consume,
    running_host,
    wait_for_metadata,
)
from tests.hosts.test_hosts_isr import produce_to, replica_log

TOPIC = "guarded"
BATCHES = 30


def segment_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.log"))}


def destroy_batch(directory: Path, segment: int, nth: int) -> int:
    """Overwrite the header of the nth batch of a segment on disk; its base offset."""
    path = sorted(directory.glob("*.log"))[segment]
    position = 0
    for i, (header, view) in enumerate(iter_batches(path.read_bytes())):
        if i == nth:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, bytes(61), position)
            finally:
                os.close(fd)
            return header.base_offset
        position += len(view)
    raise AssertionError(f"{path} has no batch {nth}")


def damage_body(directory: Path, segment: int, nth: int) -> int:
    """Change one byte of a record value in the nth batch of a segment, its header
    intact (only the CRC tells); the batch's base offset."""
    path = sorted(directory.glob("*.log"))[segment]
    data = path.read_bytes()
    position = 0
    for i, (header, view) in enumerate(iter_batches(data)):
        if i == nth:
            at = data.index(b"-b", position, position + len(view)) + 1
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, b"X", at)
            finally:
                os.close(fd)
            return header.base_offset
        position += len(view)
    raise AssertionError(f"{path} has no batch {nth}")


async def all_equal(directories: list[Path], expected: dict[str, bytes]) -> None:
    with trio.fail_after(WAIT_S):
        while any(segment_files(d) != expected for d in directories):  # noqa: ASYNC110 - fetchers' progress
            await trio.sleep(0.1)


async def leader_of(server: KafkaServer, other_than: int | None = None) -> tuple[int, int]:
    """(leader, leader epoch) of partition 0 once Metadata names a leader (not `other_than`)."""
    response = await wait_for_metadata(
        server,
        TOPIC,
        lambda r: (
            r.topics
            and r.topics[0].partitions
            and r.topics[0].partitions[0].leader_id >= 0
            and r.topics[0].partitions[0].leader_id != other_than
        ),
    )
    partition = response.topics[0].partitions[0]
    return partition.leader_id, partition.leader_epoch


async def test_a_corrupt_batch_is_repaired_from_an_in_sync_replica(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    async with AsyncExitStack() as stack:
        servers: dict[int, KafkaServer] = {}

        async def start(node_id: int) -> None:
            host = running_host(tmp_path, node_id, zookeeper_connect)
            servers[node_id] = await stack.enter_async_context(host)

        for node_id in HOSTS:
            await start(node_id)
        await wait_for_metadata(servers[1], None, lambda r: len(r.brokers) == 3)
        deployment = servers[1].deployment
        assert isinstance(deployment, ZooKeeperDeployment)
        await deployment.log_manager.create_topic(TOPIC, 1, 3, {"segment.bytes": "1000"})
        leader_id, epoch = await leader_of(servers[1])
        leading = servers[leader_id].deployment
        assert isinstance(leading, ZooKeeperDeployment)
        with trio.fail_after(WAIT_S):
            while leading.replication.leader(TOPIC, 0) is None:  # noqa: ASYNC110 - ZooKeeper's watches
                await trio.sleep(0.05)
        values = []
        for i in range(BATCHES):
            pair = [b"r%02d-a" % i, b"r%02d-b" % i]
            answer = await produce_to(servers[leader_id], TOPIC, pair, acks=-1)
            assert answer.error_code == ErrorCode.NONE
            values.extend(pair)
        directories = {n: replica_log(s, TOPIC).directory for n, s in servers.items()}
        expected = segment_files(directories[leader_id])
        assert len(expected) >= 3
        await all_equal(list(directories.values()), expected)

        # The leader's segment is damaged while it runs: the consumer's read meets it,
        # the leader hands the partition on, and the consumer reads on from the new one.
        destroy_batch(directories[leader_id], 1, 4)
        every = ",".join(bootstrap(s) for s in servers.values())
        consumed = await trio.to_thread.run_sync(consume, every, TOPIC, len(values))
        assert consumed == values
        new_leader, new_epoch = await leader_of(servers[1], other_than=leader_id)
        assert new_epoch > epoch
        corrupt_reads = servers[leader_id].metrics.get(
            "kafka.server", "BrokerTopicMetrics", "CorruptBatchFetchesPerSec", topic=TOPIC
        )
        assert isinstance(corrupt_reads, Meter) and corrupt_reads.count >= 1
        await all_equal(list(directories.values()), expected)

        # A follower stopped, its segment damaged, started after an unclean stop: its
        # recovery finds the batch, and it fetches the leader's copy.
        follower = next(n for n in HOSTS if n != new_leader)
        servers[follower].shutdown()
        with trio.fail_after(WAIT_S):
            await servers[follower].stopped.wait()
        await wait_for_metadata(servers[new_leader], None, lambda r: len(r.brokers) == 2)
        destroy_batch(directories[follower], 0, 3)
        (directories[follower].parent / CLEAN_SHUTDOWN_FILE).unlink()
        await start(follower)
        await all_equal(list(directories.values()), expected)

        # A record body damaged in the leader's segment, its header intact: the leader's
        # read checks the CRC, and the partition is repaired as for a destroyed header.
        damage_body(directories[new_leader], 0, 6)
        consumed = await trio.to_thread.run_sync(consume, every, TOPIC, len(values))
        assert consumed == values
        await leader_of(servers[1], other_than=new_leader)
        await all_equal(list(directories.values()), expected)
        for server in servers.values():
            failed = server.metrics.get(
                "kafka.server", "ReplicaFetcherManager", "FailedPartitionsCount", clientId="Replica"
            )
            assert isinstance(failed, Gauge) and failed.value == 0
