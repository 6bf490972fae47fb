"""Two processes' logs over one store and one log dir (two managers in one Trio run)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from broker.cluster.cluster_image import BrokerImage, ClusterImage
from broker.cluster.cluster_log_manager import ClusterLogManager
from broker.cluster.cluster_topology import ClusterTopology
from broker.cluster.metadata_store import SqliteMetadataStore
from broker.config import BrokerConfig
from broker.errors import KafkaError
from broker.handlers.common import AUTHORIZED_OPERATIONS_OMITTED
from broker.handlers.log_topics import LogTopicSource
from broker.log.log_config import LogConfig, broker_topic_defaults
from broker.protocol.error_codes import ErrorCode
from broker.remote_partition import RemotePartition
from tests.log.helpers import make_batch

DEFAULTS = broker_topic_defaults(BrokerConfig({}))


def config(log_dir: Path) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0"})


@asynccontextmanager
async def two_processes(log_dir: Path) -> AsyncIterator[tuple[ClusterLogManager, ...]]:
    setup = SqliteMetadataStore(log_dir)
    setup.prepare_nodes([1, 2])
    for node in (1, 2):
        setup.register_broker(node, {"PLAINTEXT": ("127.0.0.1", 9000 + node)})
    managers = tuple(
        ClusterLogManager(config(log_dir), SqliteMetadataStore(log_dir), node, poll_interval_s=0.01)
        for node in (1, 2)
    )
    async with trio.open_nursery() as nursery:
        for manager in managers:
            await nursery.start(manager.run)
        yield managers
        nursery.cancel_scope.cancel()


async def append(manager: ClusterLogManager, topic: str, partition: int) -> int:
    log = manager.partition(topic, partition)
    assert log is not None
    batch, header = make_batch([b"v"])
    result = await log.append(batch, header)
    return result.base_offset


async def test_a_topic_created_on_one_process_is_ready_on_both_when_the_call_returns(
    tmp_path: Path,
) -> None:
    async with two_processes(tmp_path) as (first, second):
        await first.create_topic("orders", 4)
        for manager in (first, second):
            topic = manager.topic("orders")
            assert topic is not None and len(topic.partitions) == 4
        local = {
            m.node_id: [not isinstance(p, RemotePartition) for p in m.topic("orders").partitions]  # type: ignore[union-attr]
            for m in (first, second)
        }
        # Every partition is open on exactly one process.
        assert [a + b for a, b in zip(local[1], local[2], strict=True)] == [1, 1, 1, 1]
        for partition in range(4):
            leader, other = (first, second) if local[1][partition] else (second, first)
            assert await append(leader, "orders", partition) == 0
            with pytest.raises(KafkaError) as refused:
                await append(other, "orders", partition)
            assert refused.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_configs_partitions_and_deletion_reach_the_other_process(tmp_path: Path) -> None:
    async with two_processes(tmp_path) as (first, second):
        await first.create_topic("t", 2)
        await second.alter_topic_configs("t", {"retention.ms": "1000"})
        assert first.topic("t").configs() == {"retention.ms": "1000"}  # type: ignore[union-attr]
        await second.create_partitions("t", 5)
        assert len(first.topic("t").partitions) == 5  # type: ignore[union-attr]
        with pytest.raises(KafkaError) as exists:
            await second.create_topic("t", 1)
        assert exists.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        await first.delete_topic("t")
        assert second.topic("t") is None
        assert not any(tmp_path.glob("t-*"))  # noqa: ASYNC240 - a tmp dir of a few files


async def test_once_a_delete_returns_every_process_answers_the_topic_unknown(
    tmp_path: Path,
) -> None:
    """Kafka's answers after DeleteTopics, from whichever process a client asks: Metadata
    UNKNOWN_TOPIC_OR_PARTITION without partitions, and no partition to produce to (Produce
    answers UNKNOWN_TOPIC_OR_PARTITION), never the topic again or under another leader."""
    async with two_processes(tmp_path) as managers:
        await managers[0].create_topic("gone", 2)
        await managers[1].delete_topic("gone")
        for index, manager in enumerate(managers):
            topology = ClusterTopology(
                manager, process_index=index, process_count=2, peer_dir=tmp_path
            )
            source = LogTopicSource(manager, topology)
            (described,) = await source.describe_topics(["gone"], allow_auto_create=False)
            assert described.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert described.partitions == ()
            assert [manager.partition("gone", p) for p in range(2)] == [None, None]


async def test_producer_ids_are_unique_across_processes(tmp_path: Path) -> None:
    async with two_processes(tmp_path) as (first, second):
        ids = [await m.allocate_producer_id() for m in (first, second, first, second)]
        assert len(set(ids)) == 4


async def test_a_restarted_process_reopens_its_partitions_with_their_data(tmp_path: Path) -> None:
    async with two_processes(tmp_path) as (first, second):
        await first.create_topic("kept", 2)
        for manager in (first, second):
            for p in range(2):
                if not isinstance(manager.partition("kept", p), RemotePartition):
                    await append(manager, "kept", p)
    assert (tmp_path / ".kafka_cleanshutdown.node-1").exists()
    async with two_processes(tmp_path) as (first, second):
        ends = []
        for manager in (first, second):
            for p in range(2):
                log = manager.partition("kept", p)
                if not isinstance(log, RemotePartition):
                    assert log is not None
                    ends.append(log.log_end_offset)
        assert ends == [1, 1]


def test_metadata_reports_a_partition_whose_leader_is_down_as_leader_not_available(
    tmp_path: Path,
) -> None:
    remote = RemotePartition("t", 0, 2, LogConfig.from_effective(DEFAULTS))

    class Logs:
        """The cluster log as the topology reads it: node 2, the leader, is down."""

        node_id = 1
        image = ClusterImage(
            3,
            {
                1: BrokerImage(1, {"PLAINTEXT": ("h", 1)}, True, 3),
                2: BrokerImage(2, {"PLAINTEXT": ("h", 2)}, False, 3),
            },
            {},
        )

        def partition(self, topic: str, index: int) -> RemotePartition:
            return remote

    class Topic:
        name = "t"
        topic_id = uuid.uuid4()
        is_internal = False
        partitions = [remote]

    logs = Logs()
    topology = ClusterTopology(logs, process_index=0, process_count=2, peer_dir=tmp_path)
    source = LogTopicSource(logs, topology)  # type: ignore[arg-type]
    described = source.describe(Topic(), AUTHORIZED_OPERATIONS_OMITTED)  # type: ignore[arg-type]
    (partition,) = described.partitions
    assert partition.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert partition.leader_id == -1
    assert partition.offline_replicas == (2,)
