"""Both topologies against the `Topology` protocol: what the broker's subsystems may
rely on whichever deployment built it (broker/topology.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.cluster.cluster_image import BrokerImage, ClusterImage, TopicImage
from broker.cluster.cluster_topology import ClusterTopology
from broker.config import BrokerConfig
from broker.log.log_config import LogConfig, broker_topic_defaults
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.remote_partition import RemotePartition
from broker.topology import (
    PartitionLeader,
    SingleProcessTopology,
    TopicPartition,
    Topology,
)
from tests.hosts.topology_views import zookeeper_topology

LISTENER = "PLAINTEXT"
LOG_CONFIG = LogConfig.from_effective(broker_topic_defaults(BrokerConfig({})))


@attrs.frozen
class Deployed:
    """A topology and what the test built it with."""

    topology: Topology
    shards: int
    local_partitions: tuple[TopicPartition, ...]


def endpoint(node: int) -> tuple[str, int]:
    return ("127.0.0.1", 9000 + node)


class ClusterLogView:
    """Process 2 of three (nodes 1..3) as its log manager sees the store: topic `t`'s
    partitions led by nodes 1, 2, 3; `down` lists the processes marked down."""

    def __init__(self, down: Iterable[int] = ()) -> None:
        self.node_id = 2
        dead = set(down)
        self.image = ClusterImage(
            5,
            {n: BrokerImage(n, {LISTENER: endpoint(n)}, n not in dead, 5) for n in (1, 2, 3)},
            {"t": TopicImage("t", uuid.UUID(int=1), {}, (1, 2, 3))},
        )

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        leader = self.image.topics[topic].leaders[partition]
        if leader == self.node_id:
            return None  # opened here (a real log's partition; its data is not read)
        return RemotePartition(topic, partition, leader, LOG_CONFIG)


def cluster_topology(tmp_path: Path, down: Iterable[int] = ()) -> ClusterTopology:
    return ClusterTopology(
        ClusterLogView(down), process_index=1, process_count=3, peer_dir=tmp_path
    )


@pytest.fixture(params=["single process", "cluster member", "host among hosts"])
def deployed(request: pytest.FixtureRequest, tmp_path: Path) -> Deployed:
    if request.param == "single process":
        return Deployed(SingleProcessTopology(2, lambda _listener: endpoint(2)), 1, (("t", 0),))
    if request.param == "host among hosts":
        # Node 1 of three, leading __consumer_offsets-0: it coordinates every group.
        return Deployed(zookeeper_topology(node_id=1, live=(1, 2, 3)), 1, (("t", 0),))
    return Deployed(cluster_topology(tmp_path), 3, (("t", 1),))


def test_the_broker_lists_itself_and_counts_what_it_lists(deployed: Deployed) -> None:
    topology = deployed.topology
    brokers = topology.brokers(LISTENER)
    assert (topology.node_id, *endpoint(topology.node_id)) in brokers
    assert topology.registered_brokers() == len(brokers)
    assert topology.controller_id() in {node for node, _, _ in brokers}


keys = st.text(max_size=40)


@given(key=keys)
# The questions change nothing in the topology: one fixture serves every example.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_key_has_one_coordinator_and_only_it_owns_the_key(deployed: Deployed, key: str) -> None:
    topology = deployed.topology
    node = topology.coordinator_node(key)
    assert topology.owns_group(key) == (node == topology.node_id)
    assert topology.locate_coordinator(key, LISTENER) == (node, *endpoint(node))
    txn_node = topology.coordinator_node(key, transaction=True)
    assert topology.owns_transaction(key) == (txn_node == topology.node_id)
    assert topology.locate_coordinator(key, LISTENER, transaction=True) == (
        txn_node,
        *endpoint(txn_node),
    )


def test_the_broker_owns_exactly_one_group_shard(deployed: Deployed) -> None:
    owned = [s for s in range(deployed.shards + 2) if deployed.topology.owns_group_shard(s)]
    assert len(owned) == 1


def test_a_partition_led_here_is_local_and_online(deployed: Deployed) -> None:
    topology = deployed.topology
    for topic, index in deployed.local_partitions:
        assert topology.is_local_leader(topic, index)
        assert topology.leader_of(topic, index) == topology.node_id
        leader = topology.partition_leader(topic, index)
        assert (leader.node_id, leader.online) == (topology.node_id, True)


class RecordingMarkers:
    """This broker's own marker appends, recorded."""

    def __init__(self) -> None:
        self.partitions: list[TopicPartition] = []
        self.groups = 0

    async def write_partition_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        topic: str,
        index: int,
        coordinator_epoch: int = 0,
    ) -> None:
        self.partitions.append((topic, index))

    async def write_group_marker(self, producer_id: int, epoch: int, commit: bool) -> None:
        self.groups += 1

    async def write_markers(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        groups: Iterable[str],
        coordinator_epoch: int = 0,
    ) -> None:
        for topic, index in partitions:
            await self.write_partition_marker(producer_id, epoch, commit, topic, index)
        if list(groups):
            await self.write_group_marker(producer_id, epoch, commit)


async def test_markers_for_partitions_and_groups_of_this_broker_are_appended_here(
    deployed: Deployed,
) -> None:
    topology = deployed.topology
    local = RecordingMarkers()
    group = next(g for g in (f"group-{i}" for i in range(100)) if topology.owns_group(g))
    await topology.route_markers(local).write_markers(
        7, 0, True, deployed.local_partitions, [group]
    )
    assert local.partitions == list(deployed.local_partitions)
    assert local.groups == 1


async def test_a_transaction_this_broker_coordinates_is_verified_by_its_coordinator(
    deployed: Deployed,
) -> None:
    topology = deployed.topology
    asked: list[tuple[str | None, TopicPartition]] = []

    async def local(tid: str | None, producer_id: int, epoch: int, tp: TopicPartition) -> int:
        asked.append((tid, tp))
        return ErrorCode.INVALID_TXN_STATE

    tid = next(t for t in (f"tx-{i}" for i in range(100)) if topology.owns_transaction(t))
    (partition,) = deployed.local_partitions
    verify = topology.transaction_verifier(local)
    topology.on_marker(7, *partition)
    assert await verify(tid, 7, 0, partition) == ErrorCode.INVALID_TXN_STATE
    assert asked == [(tid, partition)]


# -- what only a cluster has: other brokers ------------------------------------------------


def test_a_partition_another_process_leads_is_remote_and_offline_while_it_is_down(
    tmp_path: Path,
) -> None:
    up = cluster_topology(tmp_path)
    assert not up.is_local_leader("t", 0)
    assert up.leader_of("t", 0) == 1
    assert up.partition_leader("t", 0) == PartitionLeader(1, online=True)
    down = cluster_topology(tmp_path, down=[1])
    assert down.partition_leader("t", 0) == PartitionLeader(1, online=False)
    assert [node for node, _, _ in down.brokers(LISTENER)] == [2, 3]
    assert down.controller_id() == 2


def test_a_coordinator_that_is_down_is_not_located(tmp_path: Path) -> None:
    topology = cluster_topology(tmp_path, down=[3])
    key = next(k for k in (f"g{i}" for i in range(100)) if topology.coordinator_node(k) == 3)
    assert topology.locate_coordinator(key, LISTENER) is None
    assert not topology.owns_group(key)
