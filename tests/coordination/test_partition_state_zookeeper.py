"""Topic and partition state on a real ZooKeeper: conditional writes and the controller fence."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import trio

from broker.coordination.controller_election import CONTROLLER_EPOCH_PATH
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.partition_state_store import ControllerMovedError, PartitionStateStore
from broker.coordination.partition_state_znodes import (
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
)
from broker.coordination.store import BadVersionError, NodeExistsError, WatchEvent
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

WAIT_S = 30

Pending = dict[TopicPartition, tuple[int, ...]]


async def test_partition_state_is_written_conditionally_and_fenced_by_the_controller_epoch(
    zookeeper_connect: str,
) -> None:
    store = KazooCoordinationStore(
        ZooKeeperSettings(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    )
    await store.connect()
    try:
        states = PartitionStateStore(store)
        await store.create(CONTROLLER_EPOCH_PATH, b"1")
        epoch_node = await store.get(CONTROLLER_EPOCH_PATH)
        assert epoch_node is not None
        tp = TopicPartition("orders", 0)

        # The topic and its first state, as the controller creates them.
        await states.create_topic(TopicAssignment("orders", {0: (1, 2, 3)}))
        with pytest.raises(NodeExistsError):
            await states.create_topic(TopicAssignment("orders", {0: (1,)}))
        assert await states.topics() == ["orders"]
        first = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2, 3)), controller_epoch=1)
        await states.create_partition_states({tp: first}, epoch_node.version)
        read = await states.partition_state(tp)
        assert read == first

        # The leader shrinks its ISR at the version it read; a write at that stale
        # version afterwards (a second writer) is refused.
        changes, watch = trio.open_memory_channel[WatchEvent](10)
        assert await states.partition_state(tp, watch=changes) == first
        shrunk = await states.update_isr_as_leader(tp, first.leader_and_isr.with_isr((1, 2)), 1)
        assert shrunk == LeaderAndIsr(1, 0, (1, 2), zk_version=1)
        with trio.fail_after(WAIT_S):
            assert (await watch.receive()).path.endswith("/partitions/0/state")
        with pytest.raises(BadVersionError):
            await states.update_isr_as_leader(tp, first.leader_and_isr.with_isr((1,)), 1)
        path = await states.propagate_isr_changes([tp])
        assert path.startswith("/isr_change_notification/isr_change_")
        notifications = await states.isr_change_notifications()
        assert list(notifications.values()) == [[tp]]
        await states.delete_isr_change_notifications(list(notifications))
        assert await states.isr_change_notifications() == {}

        # The controller elects at the current version; a stale zkVersion is refused...
        elected = await states.update_leader_and_isr(
            tp, shrunk.new_leader_and_isr(2, (2,)), 1, epoch_node.version
        )
        assert elected == LeaderAndIsr(2, 1, (2,), zk_version=2)
        with pytest.raises(BadVersionError) as stale:
            await states.update_leader_and_isr(
                tp, shrunk.new_leader_and_isr(1, (1,)), 1, epoch_node.version
            )
        assert not isinstance(stale.value, ControllerMovedError)
        # ...and so is any write of a controller deposed by a newer epoch.
        await store.set(CONTROLLER_EPOCH_PATH, b"2", version=epoch_node.version)
        with pytest.raises(ControllerMovedError):
            await states.update_leader_and_isr(
                tp, elected.new_leader_and_isr(3, (3,)), 1, epoch_node.version
            )
        final = await states.partition_state(tp)
        assert final is not None and final.leader_and_isr == elected

        # A reassignment is one znode at a time, as in Kafka.
        await states.create_partition_reassignment({tp: (3, 2, 1)})
        with pytest.raises(NodeExistsError):
            await states.create_partition_reassignment({tp: (1, 2, 3)})
        assert await states.partition_reassignment() == {tp: (3, 2, 1)}
        await states.delete_partition_reassignment()
        assert await states.partition_reassignment() == {}
    finally:
        await store.close()


async def test_admin_requests_keep_the_topic_znode_whole_and_deletion_removes_every_znode(
    zookeeper_connect: str,
) -> None:
    store = KazooCoordinationStore(
        ZooKeeperSettings(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    )
    await store.connect()
    try:
        states = PartitionStateStore(store)
        tp = TopicPartition("moving", 0)
        document = {"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": {"0": [1, 2]}}
        await store.ensure_path("/brokers/topics")
        await store.create("/brokers/topics/moving", json.dumps(document).encode())
        await store.ensure_path("/config/topics")
        await store.create("/config/topics/moving", b'{"version":1,"config":{}}')

        # A reassignment's start and end: the topic id and version survive each write.
        await states.update_topic_assignment("moving", {0: (3, 1, 2)}, {0: (3,)}, {0: (1,)})
        moving = await states.topic_assignment("moving")
        assert moving == TopicAssignment("moving", {0: (3, 1, 2)}, {0: (3,)}, {0: (1,)})
        await states.update_topic_assignment("moving", {0: (3, 2)}, {}, {})
        node = await store.get("/brokers/topics/moving")
        assert node is not None
        written = json.loads(node.data)
        assert written["topic_id"] == document["topic_id"] and written["version"] == 3
        assert (written["partitions"], written["adding_replicas"]) == ({"0": [3, 2]}, {})

        # The reassignment request: set, replaced, gone when nothing remains.
        await states.update_partition_reassignment(lambda _pending: {tp: (3, 2)})
        await states.update_partition_reassignment(lambda _pending: {tp: (2, 3)})
        assert await states.partition_reassignment() == {tp: (2, 3)}
        await states.update_partition_reassignment(lambda _pending: {})
        assert await store.get("/admin/reassign_partitions") is None

        # Deletion asked twice is asked once; the controller's part removes it all.
        await states.request_topic_deletion("moving")
        await states.request_topic_deletion("moving")
        assert await states.topics_to_delete() == ["moving"]
        first = LeaderIsrAndControllerEpoch(LeaderAndIsr(3, 0, (3, 2)), controller_epoch=1)
        await store.create(CONTROLLER_EPOCH_PATH, b"1")
        epoch_node = await store.get(CONTROLLER_EPOCH_PATH)
        assert epoch_node is not None
        await states.create_partition_states({tp: first}, epoch_node.version)
        await states.delete_topic("moving")
        for path in (
            "/brokers/topics/moving",
            "/config/topics/moving",
            "/admin/delete_topics/moving",
        ):
            assert await store.get(path) is None
        assert await states.topics_to_delete() == []
    finally:
        await store.close()


async def test_concurrent_reassignment_requests_on_two_sessions_never_lose_one(
    zookeeper_connect: str,
) -> None:
    settings = ZooKeeperSettings(
        zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=10000
    )
    stores = [KazooCoordinationStore(settings), KazooCoordinationStore(settings)]
    for store in stores:
        await store.connect()
    try:
        writers = [PartitionStateStore(store) for store in stores]
        asked = [TopicPartition("moving", p) for p in range(12)]

        def adding(tp: TopicPartition) -> Callable[[Pending], Pending]:
            def change(pending: Pending) -> Pending:
                pending[tp] = (tp.partition % 3 + 1, 4)
                return pending

            return change

        def removing(tp: TopicPartition) -> Callable[[Pending], Pending]:
            def change(pending: Pending) -> Pending:
                pending.pop(tp, None)
                return pending

            return change

        # Twelve read-modify-writes racing on two sessions: each lands.
        with trio.fail_after(WAIT_S):
            async with trio.open_nursery() as nursery:
                for i, tp in enumerate(asked):
                    nursery.start_soon(writers[i % 2].update_partition_reassignment, adding(tp))
        assert await writers[0].partition_reassignment() == {
            tp: (tp.partition % 3 + 1, 4) for tp in asked
        }
        # Removals racing with additions: exactly the removed ones go.
        late = [TopicPartition("late", p) for p in range(4)]
        with trio.fail_after(WAIT_S):
            async with trio.open_nursery() as nursery:
                for i, tp in enumerate(asked[:6]):
                    nursery.start_soon(writers[i % 2].update_partition_reassignment, removing(tp))
                for i, tp in enumerate(late):
                    nursery.start_soon(writers[i % 2].update_partition_reassignment, adding(tp))
        remaining = await writers[1].partition_reassignment()
        assert sorted(remaining) == sorted(asked[6:] + late)
    finally:
        for store in stores:
            await store.close()
