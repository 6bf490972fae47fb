"""A reassignment's completion on a real ZooKeeper when the leader shrinks the ISR at the
moment the controller writes: the assignment must not move ahead of the ISR, or brokers
see replicas that leave out an ISR member (CI once crashed a leader on exactly that:
"ISR (1, 2) outside (1, 3)")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack

import trio

from broker.coordination.kafka_controller import ControllerSettings, KafkaController
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.partition_state_znodes import (
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
    partition_state_path,
)
from broker.coordination.store import Op, SetOp
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition
from tests.coordination.test_kafka_controller_zookeeper import active_controller, broker
from tests.coordination.test_zookeeper_membership import WAIT_S, connected
from tests.replication.recording_notifier import RecordingNotifier
from tests.waiting import wait_until

TP = TopicPartition("moved", 0)


class ShrinkingStore(KazooCoordinationStore):
    """A real ZooKeeper store that, once armed, lets the partition's leader shrink the ISR
    to `shrunk` just before the controller's first write of a state without it."""

    shrunk: tuple[int, ...] = ()
    injected = 0

    async def commit(self, ops: Sequence[Op]) -> None:
        for op in ops:
            if ShrinkingStore.shrunk and isinstance(op, SetOp):
                if op.path != partition_state_path(TP):
                    continue
                written = LeaderIsrAndControllerEpoch.decode(TP, op.data, op.version)
                if set(written.leader_and_isr.isr) >= set(ShrinkingStore.shrunk):
                    continue
                shrunk, ShrinkingStore.shrunk = ShrinkingStore.shrunk, ()
                state = written.leader_and_isr
                leaders_write = LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(state.leader, state.leader_epoch - 1, shrunk),
                    written.controller_epoch,
                )
                await self.set(op.path, leaders_write.encode(), version=op.version)
                ShrinkingStore.injected += 1
        await super().commit(ops)


def shrinking_store(connect: str) -> ShrinkingStore:
    return ShrinkingStore(
        ZooKeeperSettings(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    )


async def test_a_completion_that_meets_an_isr_shrink_leaves_the_assignment_until_the_isr_allows(
    zookeeper_connect: str,
) -> None:
    notifier = RecordingNotifier()
    settings = ControllerSettings(auto_leader_rebalance_enable=False)

    def host(node_id: int) -> AbstractAsyncContextManager[tuple[KafkaController, trio.CancelScope]]:
        return broker(
            zookeeper_connect, node_id, notifier, settings, shrinking_store(zookeeper_connect)
        )

    async with (
        host(1) as (c1, _s1),
        host(2) as (c2, _s2),
        host(3) as (c3, _s3),
        connected(zookeeper_connect) as leader_session,
    ):
        controllers = {1: c1, 2: c2, 3: c3}
        active_id = await active_controller(controllers)
        controller = controllers[active_id]
        leader, kept, added = active_id, *[b for b in (1, 2, 3) if b != active_id]
        states = PartitionStateStore(leader_session)
        await states.create_topic(TopicAssignment(TP.topic, {0: (leader, kept)}))
        await wait_until(lambda: TP in controller.partition_states, WAIT_S)
        await states.create_partition_reassignment({TP: (leader, added)})
        await wait_until(lambda: added in controller.partition_states[TP].replicas, WAIT_S)

        async def leader_adds_to_isr() -> None:
            found = await states.partition_state(TP)
            assert found is not None
            state = found.leader_and_isr
            await states.update_isr_as_leader(
                TP, state.with_isr((leader, kept, added)), found.controller_epoch
            )
            await states.propagate_isr_changes([TP])

        # The added replica joins the ISR; as the controller completes, the leader drops
        # it again (it lagged): the controller's write fails, and it decides once more.
        ShrinkingStore.shrunk = (leader, kept)
        await leader_adds_to_isr()
        await wait_until(lambda: ShrinkingStore.injected == 1, WAIT_S)
        await wait_until(
            lambda: controller.partition_states[TP].leader_and_isr.isr == (leader, kept), WAIT_S
        )
        assignment = await states.topic_assignment(TP.topic)
        assert assignment is not None
        assert set(assignment.partitions[0]) == {leader, kept, added}
        assert (await states.partition_reassignment()) == {TP: (leader, added)}

        # The replica catches up again: now the reassignment completes.
        await leader_adds_to_isr()
        await wait_until(
            lambda: controller.partition_states[TP].replicas == (leader, added), WAIT_S
        )
        final = await states.partition_state(TP)
        assignment = await states.topic_assignment(TP.topic)
        assert final is not None and assignment is not None
        assert assignment.partitions[0] == (leader, added)
        assert (final.leader_and_isr.leader, final.leader_and_isr.isr) == (leader, (leader, added))


async def test_a_new_controller_reverts_a_cancelled_move_and_completes_one_still_asked(
    zookeeper_connect: str,
) -> None:
    """Two moves started by a controller whose session then ended: one cancelled (its
    entry taken out of `/admin/reassign_partitions`), one still asked. The next controller
    knows them only from the topic znode's `adding_replicas` / `removing_replicas`
    (Kafka's initializePartitionReassignments): it reverts the first to the replicas
    before, and completes the second once its new replica is in sync."""
    notifier = RecordingNotifier()
    settings = ControllerSettings(auto_leader_rebalance_enable=False)
    async with AsyncExitStack() as stack:
        brokers = {
            b: await stack.enter_async_context(broker(zookeeper_connect, b, notifier, settings))
            for b in (1, 2, 3)
        }
        session = await stack.enter_async_context(connected(zookeeper_connect))
        controllers = {b: controller for b, (controller, _) in brokers.items()}
        first = await active_controller(controllers)
        x, y = [b for b in (1, 2, 3) if b != first]
        cancelled, resumed = TopicPartition("moved", 0), TopicPartition("moved", 1)
        states = PartitionStateStore(session)
        await states.create_topic(TopicAssignment("moved", {0: (x, y), 1: (x,)}))
        controller = controllers[first]
        await wait_until(lambda: resumed in controller.partition_states, WAIT_S)
        await states.create_partition_reassignment({cancelled: (x, first), resumed: (x, y)})
        await wait_until(
            lambda: (
                first in controller.partition_states[cancelled].replicas
                and y in controller.partition_states[resumed].replicas
            ),
            WAIT_S,
        )

        # The controller's session ends; the move to it is cancelled meanwhile.
        brokers[first][1].cancel()
        await states.update_partition_reassignment(
            lambda pending: {tp: r for tp, r in pending.items() if tp != cancelled}
        )
        await wait_until(lambda: any(controllers[b].active_epoch.value > 0 for b in (x, y)), WAIT_S)

        async def assignment_is(partition: int, replicas: tuple[int, ...]) -> bool:
            found = await states.topic_assignment("moved")
            return (
                found is not None
                and found.partitions[partition] == replicas
                and partition not in found.adding_replicas
                and partition not in found.removing_replicas
            )

        await eventually(lambda: assignment_is(0, (x, y)))
        assert await states.partition_reassignment() == {resumed: (x, y)}

        # The still-asked move completes once its new replica joins the ISR.
        found = await states.partition_state(resumed)
        assert found is not None
        await states.update_isr_as_leader(
            resumed, found.leader_and_isr.with_isr((x, y)), found.controller_epoch
        )
        await states.propagate_isr_changes([resumed])
        await eventually(lambda: assignment_is(1, (x, y)))
        await eventually(lambda: equal_to({}, states.partition_reassignment()))


async def equal_to(expected: object, found: Awaitable[object]) -> bool:
    return await found == expected


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ZooKeeper until `check` holds (its znodes announce nothing to the test)."""
    with trio.fail_after(WAIT_S):
        while not await check():  # noqa: ASYNC110 - polling is the point: there is no event
            await trio.sleep(0.05)
