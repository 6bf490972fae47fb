"""A `ZooKeeperTopology` over views set by the test instead of ZooKeeper's watches:
brokers 1..3 (PLAINTEXT on 127.0.0.1:9000+id, rack r<id>), topic `t` with partition
p led by broker p+1 at leader epoch 4, replicas (p+1, then the others), ISR all;
`__consumer_offsets`-0 led by `offsets_leader` (None: not created; the topology then
calls `want_offsets_topic`), `__transaction_state`-0 by `transactions_leader` (None: the
same broker)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

import trio_util

from broker.coordination.broker_registration import BrokerEndpoint, BrokerRegistration
from broker.coordination.controller_election import ControllerView
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.partition_state_znodes import TopicAssignment
from broker.coordinator.group_metadata_partition import CONSUMER_OFFSETS
from broker.hosts.partition_state_view import PartitionStateView, TopicState
from broker.hosts.zookeeper_topology import ZooKeeperTopology
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.transaction.replicated_transaction_log import TRANSACTION_STATE

NODES = (1, 2, 3)


def registration(node_id: int) -> BrokerRegistration:
    endpoint = BrokerEndpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9000 + node_id)
    return BrokerRegistration(node_id, (endpoint,), rack=f"r{node_id}")


def zookeeper_topology(
    *,
    node_id: int,
    live: Iterable[int] = NODES,
    controller: int = 1,
    offsets_leader: int | None = 1,
    want_offsets_topic: Callable[[], None] = lambda: None,
    transactions_leader: int | None = None,
) -> ZooKeeperTopology:
    brokers: Mapping[int, BrokerRegistration] = {n: registration(n) for n in live}
    # Never connected: the test sets the image the watches would have.
    view = PartitionStateView(KazooCoordinationStore(ZooKeeperSettings("127.0.0.1:1")))
    replicas = {p: (p + 1, *(n for n in NODES if n != p + 1)) for p in range(len(NODES))}
    states = {p: LeaderAndIsr(p + 1, 4, NODES, 2) for p in replicas}
    image = {"t": TopicState(uuid.UUID(int=1), TopicAssignment("t", replicas), {}, states)}
    internal = {CONSUMER_OFFSETS: offsets_leader, TRANSACTION_STATE: transactions_leader}
    if transactions_leader is None:
        internal[TRANSACTION_STATE] = offsets_leader
    for number, (topic, leader) in enumerate(internal.items(), start=2):
        if leader is None:
            continue
        assigned = {0: (leader, *(n for n in NODES if n != leader))}
        image[topic] = TopicState(
            uuid.UUID(int=number),
            TopicAssignment(topic, assigned),
            {},
            {0: LeaderAndIsr(leader, 0, assigned[0], 2)},
        )
    view.image.value = image
    return ZooKeeperTopology(
        node_id,
        trio_util.AsyncValue(brokers),
        trio_util.AsyncValue(ControllerView(controller)),
        view,
        want_offsets_topic,
    )
