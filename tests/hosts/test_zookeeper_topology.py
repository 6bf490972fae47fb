"""What only hosts coordinated through ZooKeeper answer: racks, replicas, ISR and leader
epochs from the partition states, leaders offline while their broker is gone."""

from __future__ import annotations

from broker.replication.leader_and_isr import NO_LEADER
from broker.topology import PartitionLeader
from tests.hosts.topology_views import zookeeper_topology


def test_brokers_come_with_their_racks_and_replication_is_bounded_by_the_live_brokers() -> None:
    topology = zookeeper_topology(node_id=2)
    assert [node for node, _, _ in topology.brokers("PLAINTEXT")] == [1, 2, 3]
    assert topology.brokers("OTHER") == []
    assert [topology.rack(n) for n in (1, 2, 3, 4)] == ["r1", "r2", "r3", None]
    assert topology.max_replication_factor() == 3
    assert zookeeper_topology(node_id=2, live=(2, 3)).max_replication_factor() == 2


def test_a_partition_reports_the_state_znode_and_is_local_only_on_its_leader() -> None:
    topology = zookeeper_topology(node_id=2)
    assert topology.partition_leader("t", 1) == PartitionLeader(
        2, online=True, replicas=(2, 1, 3), isr=(1, 2, 3), leader_epoch=4
    )
    assert topology.is_local_leader("t", 1) and not topology.is_local_leader("t", 0)
    assert topology.leader_of("t", 0) == 1
    assert topology.leader_of("t", 9) is None and topology.leader_of("u", 0) is None


def test_a_leader_whose_broker_is_gone_is_offline_and_an_unwritten_state_has_no_leader() -> None:
    topology = zookeeper_topology(node_id=2, live=(2, 3))
    assert not topology.partition_leader("t", 0).online
    unknown = topology.partition_leader("t", 7)
    assert (unknown.node_id, unknown.online) == (NO_LEADER, False)


def test_groups_and_transactions_go_to_the_leader_of_the_offsets_partition() -> None:
    topology = zookeeper_topology(node_id=2, offsets_leader=2)
    assert topology.coordinator_node("any group") == 2
    assert topology.owns_group("g") and topology.owns_transaction("t")
    assert topology.locate_coordinator("g", "PLAINTEXT") == (2, "127.0.0.1", 9002)
    elsewhere = zookeeper_topology(node_id=3, offsets_leader=1)
    assert elsewhere.locate_coordinator("g", "PLAINTEXT") == (1, "127.0.0.1", 9001)
    assert not elsewhere.owns_group("g") and not elsewhere.owns_transaction("t")
    gone = zookeeper_topology(node_id=2, live=(2, 3), offsets_leader=1)
    assert gone.locate_coordinator("g", "PLAINTEXT") is None


def test_a_coordinator_looked_up_before_the_offsets_topic_exists_asks_for_it() -> None:
    wanted: list[int] = []
    topology = zookeeper_topology(
        node_id=3, offsets_leader=None, want_offsets_topic=lambda: wanted.append(3)
    )
    assert topology.locate_coordinator("g", "PLAINTEXT") is None
    assert not topology.owns_group("g")
    assert wanted
    assert zookeeper_topology(node_id=3).coordinator_node("g") == 1


def test_transactional_ids_go_to_the_leader_of_the_transaction_state_partition() -> None:
    topology = zookeeper_topology(node_id=2, offsets_leader=1, transactions_leader=2)
    assert topology.coordinator_node("t", transaction=True) == 2
    assert topology.owns_transaction("t") and not topology.owns_group("g")
    assert topology.locate_coordinator("t", "PLAINTEXT", transaction=True) == (
        2,
        "127.0.0.1",
        9002,
    )
    assert topology.locate_coordinator("g", "PLAINTEXT") == (1, "127.0.0.1", 9001)
    assert not topology.owns_group_shard(0)
    assert zookeeper_topology(node_id=1, offsets_leader=1).owns_group_shard(0)


def test_the_controller_is_the_elected_broker_and_minus_one_without_one() -> None:
    assert zookeeper_topology(node_id=2, controller=3).controller_id() == 3
    assert zookeeper_topology(node_id=2, controller=-1).controller_id() == -1
