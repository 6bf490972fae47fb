"""A `ZooKeeperTopology` over views set by the test instead of ZooKeeper's watches:
brokers 1..3 (PLAINTEXT on 127.0.0.1:9000+id, rack r<id>), topic `t` with partition
p led by broker p+1 at leader epoch 4, replicas (p+1, then the others), ISR all."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import trio_util

from broker.coordination.broker_registration import BrokerEndpoint, BrokerRegistration
from broker.coordination.controller_election import ControllerView
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.partition_state_znodes import TopicAssignment
from broker.hosts.partition_state_view import PartitionStateView, TopicState
from broker.hosts.zookeeper_topology import ZooKeeperTopology
from broker.replication.leader_and_isr import LeaderAndIsr

NODES = (1, 2, 3)


def registration(node_id: int) -> BrokerRegistration:
    endpoint = BrokerEndpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9000 + node_id)
    return BrokerRegistration(node_id, (endpoint,), rack=f"r{node_id}")


def zookeeper_topology(
    *, node_id: int, live: Iterable[int] = NODES, controller: int = 1
) -> ZooKeeperTopology:
    brokers: Mapping[int, BrokerRegistration] = {n: registration(n) for n in live}
    # Never connected: the test sets the image the watches would have.
    view = PartitionStateView(KazooCoordinationStore(ZooKeeperSettings("127.0.0.1:1")))
    replicas = {p: (p + 1, *(n for n in NODES if n != p + 1)) for p in range(len(NODES))}
    states = {p: LeaderAndIsr(p + 1, 4, NODES, 2) for p in replicas}
    view.image.value = {
        "t": TopicState(uuid.UUID(int=1), TopicAssignment("t", replicas), {}, states)
    }
    return ZooKeeperTopology(
        node_id,
        trio_util.AsyncValue(brokers),
        trio_util.AsyncValue(ControllerView(controller)),
        view,
    )
