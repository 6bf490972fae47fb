"""The controller task on a real ZooKeeper: three brokers, one session ended, one
controlled shutdown; leadership moves to an ISR member with the epoch bumped. And a
leader's own ISR change, recorded at its zkVersion and passed on by the controller."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import trio

from broker.coordination.kafka_controller import ControllerSettings, KafkaController
from broker.coordination.membership import ClusterMembership
from broker.coordination.partition_leader import PartitionLeader
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.partition_state_znodes import TopicAssignment
from broker.coordination.store import CoordinationStore
from broker.protocol.error_codes import ErrorCode
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.partition_leader_state import LeaderSettings, PartitionLeaderState
from broker.replication.topic_partition import TopicPartition
from tests.coordination.test_zookeeper_membership import (
    WAIT_S,
    connected,
    membership,
)
from tests.replication.recording_notifier import RecordingNotifier
from tests.waiting import wait_until

REPLICAS = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}


@asynccontextmanager
async def broker(
    connect: str,
    node_id: int,
    notifier: RecordingNotifier,
    settings: ControllerSettings | None = None,
    store: CoordinationStore | None = None,
) -> AsyncIterator[tuple[KafkaController, trio.CancelScope]]:
    """A membership and its controller (on `store` when given); cancelling the scope
    closes the session."""
    member: ClusterMembership = membership(connect, node_id, store=store)
    controller = KafkaController(
        member._store,
        node_id,
        member.election.view,
        member.live_brokers.brokers,
        notifier,
        settings or ControllerSettings(),
    )
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                async with trio.open_nursery() as inner:
                    inner.start_soon(member.run)
                    inner.start_soon(controller.run)

        nursery.start_soon(run)
        with trio.fail_after(WAIT_S):
            await member.registered.wait()
        yield controller, scope
        nursery.cancel_scope.cancel()


async def active_controller(controllers: Mapping[int, KafkaController]) -> int:
    """The broker whose controller is active once all three are live to it."""
    await wait_until(
        lambda: any(c.active_epoch.value > 0 and c.live == {1, 2, 3} for c in controllers.values()),
        WAIT_S,
    )
    (active_id,) = [b for b, c in controllers.items() if c.active_epoch.value > 0]
    return active_id


async def state_of(states: PartitionStateStore, partition: int) -> LeaderAndIsr | None:
    state = await states.partition_state(TopicPartition("orders", partition))
    return None if state is None else state.leader_and_isr


async def test_the_controller_moves_leadership_when_a_session_ends_and_on_controlled_shutdown(
    zookeeper_connect: str,
) -> None:
    notifiers = {b: RecordingNotifier() for b in (1, 2, 3)}
    async with (
        broker(zookeeper_connect, 1, notifiers[1]) as (c1, s1),
        broker(zookeeper_connect, 2, notifiers[2]) as (c2, s2),
        broker(zookeeper_connect, 3, notifiers[3]) as (c3, s3),
        connected(zookeeper_connect) as observer,
    ):
        controllers, scopes = {1: c1, 2: c2, 3: c3}, {1: s1, 2: s2, 3: s3}
        active_id = await active_controller(controllers)
        controller = controllers[active_id]
        assert controller.active_epoch.value == 1

        # A topic appears: the controller creates its states, leader the first live replica.
        states = PartitionStateStore(observer)
        await states.create_topic(TopicAssignment("orders", REPLICAS))
        await wait_until(lambda: len(controller.partition_states) == 3, WAIT_S)
        for p, replicas in REPLICAS.items():
            assert await state_of(states, p) == LeaderAndIsr(replicas[0], 0, replicas)

        # A follower-and-leader's session ends: its partition moves to the next ISR member.
        killed, leaving = [b for b in (1, 2, 3) if b != active_id]
        led_by_killed = next(p for p, r in REPLICAS.items() if r[0] == killed)
        scopes[killed].cancel()
        await wait_until(lambda: controller.live == {active_id, leaving}, WAIT_S)
        await wait_until(
            lambda: all(
                killed not in s.leader_and_isr.isr for s in controller.partition_states.values()
            ),
            WAIT_S,
        )
        moved = await state_of(states, led_by_killed)
        assert moved is not None
        successor = next(b for b in REPLICAS[led_by_killed] if b != killed)
        assert moved.leader == successor
        assert moved.leader_epoch == 1
        assert killed not in moved.isr and len(moved.isr) == 2
        sent = notifiers[active_id]  # only the active controller sends
        told = sent.latest_told(successor, TopicPartition("orders", led_by_killed))
        assert told is not None and told.leader_and_isr == moved
        for p in REPLICAS:  # every partition lost the dead broker from its ISR, epoch bumped
            state = await state_of(states, p)
            assert state is not None and state.leader_epoch == 1
            assert set(state.isr) == {active_id, leaving}

        # Controlled shutdown: leadership moves first, the leaving broker leaves every ISR.
        remaining = await controller.controlled_shutdown(leaving)
        assert remaining == []
        for p in REPLICAS:
            state = await state_of(states, p)
            assert state is not None
            assert state.leader == active_id and state.isr == (active_id,)
            assert state.leader_epoch == 2
        for p in REPLICAS:  # it was told while still live, so it stops leading at once
            told = sent.latest_told(leaving, TopicPartition("orders", p))
            assert told is not None and told.leader_and_isr.leader == active_id
        assert not any(notifiers[b].leader_and_isr for b in (1, 2, 3) if b != active_id)


async def test_a_leaders_isr_shrink_is_recorded_at_its_zk_version_and_reaches_the_controller(
    zookeeper_connect: str,
) -> None:
    notifier = RecordingNotifier()
    async with (
        broker(zookeeper_connect, 1, notifier) as (c1, _s1),
        broker(zookeeper_connect, 2, notifier) as (c2, _s2),
        broker(zookeeper_connect, 3, notifier) as (c3, _s3),
        connected(zookeeper_connect) as leader_session,
    ):
        controllers = {1: c1, 2: c2, 3: c3}
        active_id = await active_controller(controllers)
        controller = controllers[active_id]
        keeps_up, silent = [b for b in (1, 2, 3) if b != active_id]
        tp = TopicPartition("orders", 0)
        states = PartitionStateStore(leader_session)
        await states.create_topic(TopicAssignment("orders", {0: (active_id, keeps_up, silent)}))
        await wait_until(lambda: tp in controller.partition_states, WAIT_S)
        created = await states.partition_state(tp)
        assert created is not None

        # The leader (the controller's broker here) runs the partition: one follower keeps
        # up, the other never fetches and leaves the ISR after replica.lag.time.max.ms.
        state = PartitionLeaderState(
            tp,
            active_id,
            (active_id, keeps_up, silent),
            created.leader_and_isr,
            log_end_offset=0,
            high_watermark=0,
            now=trio.current_time(),
            settings=LeaderSettings(replica_lag_time_max_ms=300, min_insync_replicas=2),
        )
        leader = PartitionLeader(state, created.controller_epoch, states)
        async with trio.open_nursery() as nursery:
            await nursery.start(leader.run)
            leader.on_append(1)
            answers: list[ErrorCode] = []

            async def produce() -> None:
                answers.append(await leader.wait_for_acks_all(1, WAIT_S))

            nursery.start_soon(produce)
            with trio.fail_after(WAIT_S):
                while not answers:
                    leader.on_follower_fetch(keeps_up, 1)
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        assert answers == [ErrorCode.NONE]  # answered once the ISR was (leader, keeps_up)
        recorded = await states.partition_state(tp)
        assert recorded is not None
        shrunk = (active_id, keeps_up)
        assert recorded.leader_and_isr == LeaderAndIsr(active_id, 0, shrunk, zk_version=1)

        # The controller took the notification: its view, UpdateMetadata, znode deleted.
        await wait_until(
            lambda: controller.partition_states[tp].leader_and_isr.isr == shrunk, WAIT_S
        )
        assert await states.isr_change_notifications() == {}
        assert any(
            s.leader_and_isr.isr == shrunk
            for _, request in notifier.update_metadata
            for s in request.partition_states
        )
        # Its next write names the version the leader's write left.
        assert await controller.controlled_shutdown(keeps_up) == []
        final = await states.partition_state(tp)
        assert final is not None
        assert final.leader_and_isr == LeaderAndIsr(active_id, 1, (active_id,), zk_version=2)


async def test_a_new_controller_takes_over_and_a_returning_preferred_leader_leads_again(
    zookeeper_connect: str,
) -> None:
    notifier = RecordingNotifier()
    settings = ControllerSettings(leader_imbalance_check_interval_s=0.2)
    async with (
        broker(zookeeper_connect, 1, notifier, settings) as (c1, s1),
        broker(zookeeper_connect, 2, notifier, settings) as (c2, s2),
        broker(zookeeper_connect, 3, notifier, settings) as (c3, s3),
        connected(zookeeper_connect) as observer,
    ):
        controllers, scopes = {1: c1, 2: c2, 3: c3}, {1: s1, 2: s2, 3: s3}
        first_id = await active_controller(controllers)
        states = PartitionStateStore(observer)
        await states.create_topic(TopicAssignment("orders", REPLICAS))
        await wait_until(lambda: len(controllers[first_id].partition_states) == 3, WAIT_S)

        # The controller's own session ends: another is elected (epoch 2) and moves the
        # partition the first one led.
        scopes[first_id].cancel()
        await wait_until(
            lambda: any(c.active_epoch.value == 2 for c in controllers.values()), WAIT_S
        )
        (second_id,) = [b for b, c in controllers.items() if c.active_epoch.value == 2]
        second = controllers[second_id]
        led_by_first = next(p for p, r in REPLICAS.items() if r[0] == first_id)
        tp = TopicPartition("orders", led_by_first)
        await wait_until(
            lambda: second.partition_states[tp].leader_and_isr.leader != first_id, WAIT_S
        )
        moved = await states.partition_state(tp)
        assert moved is not None and moved.controller_epoch == 2
        assert moved.leader_and_isr.leader != first_id and first_id not in moved.leader_and_isr.isr

        # The first broker returns; its leader lets it into the ISR again (as a leader
        # does once it caught up) and announces it; the rebalance check then hands the
        # partition back to its preferred replica.
        async with broker(zookeeper_connect, first_id, notifier, settings):
            await wait_until(lambda: second.live == {1, 2, 3}, WAIT_S)
            current = moved.leader_and_isr
            await states.update_isr_as_leader(
                tp, current.with_isr((*current.isr, first_id)), moved.controller_epoch
            )
            await states.propagate_isr_changes([tp])
            await wait_until(
                lambda: second.partition_states[tp].leader_and_isr.leader == first_id, WAIT_S
            )
            back = await states.partition_state(tp)
            assert back is not None
            assert back.leader_and_isr.leader == first_id
            assert back.leader_and_isr.leader_epoch == current.leader_epoch + 1
            assert back.controller_epoch == 2


async def test_a_controller_write_that_meets_a_leaders_isr_change_decides_again_on_the_new_state(
    zookeeper_connect: str,
) -> None:
    notifier = RecordingNotifier()
    async with (
        broker(zookeeper_connect, 1, notifier) as (c1, s1),
        broker(zookeeper_connect, 2, notifier) as (c2, s2),
        broker(zookeeper_connect, 3, notifier) as (c3, s3),
        connected(zookeeper_connect) as leader_session,
    ):
        controllers, scopes = {1: c1, 2: c2, 3: c3}, {1: s1, 2: s2, 3: s3}
        active_id = await active_controller(controllers)
        controller = controllers[active_id]
        in_isr, left_isr = [b for b in (1, 2, 3) if b != active_id]
        tp = TopicPartition("orders", 0)
        states = PartitionStateStore(leader_session)
        await states.create_topic(TopicAssignment("orders", {0: (active_id, in_isr, left_isr)}))
        await wait_until(lambda: tp in controller.partition_states, WAIT_S)
        # The leader shrinks its ISR; its notification has not reached the controller yet.
        created = controller.partition_states[tp].leader_and_isr
        shrunk = await states.update_isr_as_leader(tp, created.with_isr((active_id, in_isr)), 1)
        # The remaining follower dies: the controller's write at the stale version fails,
        # it reads the leader's state and decides again from it.
        scopes[in_isr].cancel()
        await wait_until(
            lambda: controller.partition_states[tp].leader_and_isr.isr == (active_id,), WAIT_S
        )
        final = await states.partition_state(tp)
        assert final is not None
        assert final.leader_and_isr == LeaderAndIsr(
            active_id, shrunk.leader_epoch + 1, (active_id,), zk_version=shrunk.zk_version + 1
        )
