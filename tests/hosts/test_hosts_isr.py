"""The leader of a replicated partition tracks its followers (three brokers on their
own loopback addresses, a real ZooKeeper): acks=all is answered once every ISR member
has the records, the high watermark is the smallest log end in the ISR, consumers
read only below it, and a follower that stops fetching leaves the ISR after
replica.lag.time.max.ms, which lets the high watermark move on and, below
min.insync.replicas, refuses acks=all."""

from __future__ import annotations

import struct
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

from broker.client.connection import KafkaConnection
from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FetchRequest
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.server import KafkaServer
from tests.hosts.test_hosts_cluster import HOSTS, WAIT_S, running_host, wait_for_metadata
from tests.integration.data_helpers import batch, produce

LAG_TIME_MAX_MS = 3000
FETCH_VERSION = 12  # topic names, replica id in the request


def last_offsets(records: bytes) -> list[int]:
    """Each batch's last offset (base offset + last offset delta, layout of RecordBatch v2)."""
    offsets, position = [], 0
    while position + 27 <= len(records):
        base, length = struct.unpack_from(">qi", records, position)
        (delta,) = struct.unpack_from(">i", records, position + 23)
        offsets.append(base + delta)
        position += 12 + length
    return offsets


async def produce_to(server: KafkaServer, topic: str, values: list[bytes], acks: int) -> Any:
    """Partition 0's answer to one batch of `values`."""
    address = HOSTS[server.node_id][0]
    async with await KafkaConnection.connect(address, server.bound_port(), "test") as connection:
        return await produce(connection, topic, batch(values), acks=acks)


async def consumer_fetch(server: KafkaServer, topic: str) -> Any:
    """Partition 0 from offset 0 as a consumer reads it (replica id -1)."""
    address = HOSTS[server.node_id][0]
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
    )
    async with await KafkaConnection.connect(address, server.bound_port(), "test") as connection:
        response = await connection.request(request, FETCH_VERSION)
    answer = response.responses[0].partitions[0]
    assert answer.error_code == 0, answer
    return answer


def replica_log(server: KafkaServer, topic: str) -> PartitionLog:
    deployment = server.deployment
    assert isinstance(deployment, ZooKeeperDeployment)
    found = deployment.log_manager.replica_log(topic, 0)
    assert found is not None
    return found


async def test_the_high_watermark_follows_the_isr_and_a_stopped_follower_leaves_it(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    extra = {"replica.lag.time.max.ms": str(LAG_TIME_MAX_MS)}
    async with AsyncExitStack() as stack:
        servers = {
            node_id: await stack.enter_async_context(
                running_host(tmp_path, node_id, zookeeper_connect, extra)
            )
            for node_id in HOSTS
        }
        topic = "tracked"
        first = servers[1]
        await wait_for_metadata(first, None, lambda r: len(r.brokers) == 3)
        deployment = first.deployment
        assert isinstance(deployment, ZooKeeperDeployment)
        await deployment.log_manager.create_topic(topic, 1, 3, {"min.insync.replicas": "3"})
        response = await wait_for_metadata(
            first, topic, lambda r: r.topics and r.topics[0].partitions[0].leader_id >= 0
        )
        leader_id = response.topics[0].partitions[0].leader_id
        leader = servers[leader_id]
        stopped_id, running_id = sorted(set(HOSTS) - {leader_id})
        leader_log = replica_log(leader, topic)
        leading = leader.deployment
        assert isinstance(leading, ZooKeeperDeployment)
        with trio.fail_after(WAIT_S):
            while leading.replication.leader(topic, 0) is None:  # noqa: ASYNC110 - ZooKeeper's watches
                await trio.sleep(0.05)

        # acks=all is answered once both followers have the records.
        values = [f"v{i}".encode() for i in range(5)]
        answer = await produce_to(leader, topic, values, acks=-1)
        assert answer.error_code == ErrorCode.NONE
        assert leader_log.high_watermark == len(values)
        for follower_id in (stopped_id, running_id):
            assert replica_log(servers[follower_id], topic).log_end_offset == len(values)
        answer = await consumer_fetch(leader, topic)
        assert answer.high_watermark == len(values)
        assert last_offsets(bytes(answer.records))[-1] == len(values) - 1

        # One follower stops fetching: records after that stay above the high watermark,
        # unseen by consumers, until the leader drops it from the ISR.
        fetchers = servers[stopped_id].deployment
        assert isinstance(fetchers, ZooKeeperDeployment)
        fetchers.replica_fetchers._fetchers[(leader_id, 0)].scope.cancel()
        more = [f"w{i}".encode() for i in range(5)]
        assert (await produce_to(leader, topic, more, acks=1)).error_code == ErrorCode.NONE
        total = len(values) + len(more)
        assert leader_log.log_end_offset == total
        answer = await consumer_fetch(leader, topic)
        assert answer.high_watermark == len(values)
        assert max(last_offsets(bytes(answer.records))) < len(values)

        response = await wait_for_metadata(
            first, topic, lambda r: stopped_id not in r.topics[0].partitions[0].isr_nodes
        )
        assert sorted(response.topics[0].partitions[0].isr_nodes) == sorted([leader_id, running_id])
        with trio.fail_after(WAIT_S):
            while (answer := await consumer_fetch(leader, topic)).high_watermark < total:  # noqa: ASYNC110 - the ISR's progress
                await trio.sleep(0.05)
        assert answer.high_watermark == total
        assert last_offsets(bytes(answer.records))[-1] == total - 1
        # Two in-sync replicas are fewer than the topic's min.insync.replicas.
        refused = await produce_to(leader, topic, [b"refused"], acks=-1)
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert leader_log.log_end_offset == total
        # The running follower learns the high watermark from the leader's answers.
        running_log = replica_log(servers[running_id], topic)
        with trio.fail_after(WAIT_S):
            while running_log.high_watermark < total:  # noqa: ASYNC110 - a fetcher's progress
                await trio.sleep(0.05)
