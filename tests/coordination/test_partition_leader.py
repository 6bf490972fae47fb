"""The leader's partition under Trio: acks=all produces in the purgatory, woken by
follower fetches and ISR changes, and the ISR changes it records (mock clock)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from broker.coordination.partition_leader import PartitionLeader
from broker.coordination.store import BadVersionError, CoordinationUnavailable
from broker.protocol.error_codes import ErrorCode
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.partition_leader_state import LeaderSettings, PartitionLeaderState
from broker.replication.topic_partition import TopicPartition

TP = TopicPartition("orders", 0)
REPLICAS = (1, 2, 3)
LAG_S = 30.0
TIMEOUT_S = 100.0


class FakeIsrStore:
    """The state znode's version and the notifications, in memory."""

    def __init__(self, zk_version: int = 0) -> None:
        self.zk_version = zk_version
        self.written: list[LeaderAndIsr] = []
        self.notified: list[list[TopicPartition]] = []
        self.failure: Exception | None = None
        self.reachable = trio.Event()  # cleared: writes wait, as kazoo's while disconnected
        self.reachable.set()

    async def update_isr_as_leader(
        self, tp: TopicPartition, leader_and_isr: LeaderAndIsr, controller_epoch: int
    ) -> LeaderAndIsr:
        await trio.lowlevel.checkpoint()
        await self.reachable.wait()
        if self.failure is not None:
            raise self.failure
        if leader_and_isr.zk_version != self.zk_version:
            raise BadVersionError("stale")
        self.zk_version += 1
        self.written.append(leader_and_isr)
        return LeaderAndIsr(
            leader_and_isr.leader, leader_and_isr.leader_epoch, leader_and_isr.isr, self.zk_version
        )

    async def propagate_isr_changes(self, partitions: Sequence[TopicPartition]) -> str:
        self.notified.append(list(partitions))
        return f"/isr_change_notification/isr_change_{len(self.notified):010d}"


def leader_state(min_insync_replicas: int = 2, log_end_offset: int = 0) -> PartitionLeaderState:
    return PartitionLeaderState(
        TP,
        1,
        REPLICAS,
        LeaderAndIsr(1, 5, REPLICAS),
        log_end_offset=log_end_offset,
        high_watermark=log_end_offset,
        now=trio.current_time(),
        settings=LeaderSettings(int(LAG_S * 1000), min_insync_replicas),
    )


@asynccontextmanager
async def leading(
    store: FakeIsrStore, min_insync_replicas: int = 2
) -> AsyncIterator[PartitionLeader]:
    leader = PartitionLeader(leader_state(min_insync_replicas), 3, store)
    async with trio.open_nursery() as nursery:
        await nursery.start(leader.run)
        yield leader
        nursery.cancel_scope.cancel()


async def produce(leader: PartitionLeader, records: int, answers: list[ErrorCode]) -> None:
    """An acks=all produce of `records` records appended at the log end."""
    assert leader.check_produce(-1) is ErrorCode.NONE
    end = leader.state.log_end_offset + records
    leader.on_append(end)
    answers.append(await leader.wait_for_acks_all(end, TIMEOUT_S))


async def test_an_acks_all_produce_is_answered_when_the_last_isr_member_fetches_past_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with leading(FakeIsrStore()) as leader, trio.open_nursery() as nursery:
        answers: list[ErrorCode] = []
        nursery.start_soon(produce, leader, 3, answers)
        await trio.sleep(1)
        assert leader.on_follower_fetch(2, 3) is ErrorCode.NONE
        await trio.sleep(1)
        assert answers == [] and leader.delayed_produce.waiting == 1
        assert leader.on_follower_fetch(3, 3) is ErrorCode.NONE
        fetched_at = trio.current_time()
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [ErrorCode.NONE]
        assert trio.current_time() == fetched_at  # woken by the fetch, not by a timer


async def test_an_acks_all_produce_times_out_when_a_follower_neither_fetches_nor_leaves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with leading(FakeIsrStore()) as leader:
        leader.state.settings = LeaderSettings(int(TIMEOUT_S * 10 * 1000), 2)
        leader.on_follower_fetch(2, 0)
        start = trio.current_time()
        answers: list[ErrorCode] = []
        await produce(leader, 1, answers)
        assert answers == [ErrorCode.REQUEST_TIMED_OUT]
        assert trio.current_time() - start == TIMEOUT_S


async def test_an_isr_shrinking_below_min_insync_replicas_answers_not_enough_replicas_after_append(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = FakeIsrStore()
    async with leading(store, min_insync_replicas=3) as leader, trio.open_nursery() as nursery:
        answers: list[ErrorCode] = []
        nursery.start_soon(produce, leader, 2, answers)
        leader.on_follower_fetch(2, 2)  # broker 2 keeps up; broker 3 is silent
        with trio.fail_after(TIMEOUT_S):
            while not answers:
                await trio.sleep(1)
                leader.on_follower_fetch(2, 2)
        assert answers == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
        assert LAG_S < trio.current_time() < LAG_S * 2
        # The shrink was written at the version read and announced to the controller.
        assert store.written == [LeaderAndIsr(1, 5, (1, 2), zk_version=0)]
        assert store.notified == [[TP]]
        assert leader.state.leader_and_isr == LeaderAndIsr(1, 5, (1, 2), zk_version=1)
        # Below min.insync.replicas the next acks=all is refused before the append.
        assert leader.check_produce(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
        # Broker 3 catches up: it joins again, recorded the same way.
        leader.on_follower_fetch(3, 2)
        await trio.testing.wait_all_tasks_blocked()
        assert leader.state.isr == (1, 2, 3)
        assert store.notified == [[TP], [TP]]
        assert leader.check_produce(-1) is ErrorCode.NONE


async def test_waiting_produces_answer_not_leader_when_leadership_moves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with leading(FakeIsrStore()) as leader, trio.open_nursery() as nursery:
        answers: list[ErrorCode] = []
        nursery.start_soon(produce, leader, 1, answers)
        nursery.start_soon(produce, leader, 1, answers)
        await trio.sleep(1)
        leader.resign()
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2


async def test_isr_changes_the_controller_beat_or_zookeeper_refused_are_not_applied(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = FakeIsrStore(zk_version=7)  # the controller wrote since this leader read
    async with leading(store) as leader:
        await trio.sleep(LAG_S * 2)  # both followers silent: a shrink is proposed
        await leader.conflict.wait()
        assert leader.state.isr == REPLICAS and store.written == []
    store = FakeIsrStore()
    store.failure = CoordinationUnavailable("ZooKeeper lost")
    async with leading(store, min_insync_replicas=1) as leader:
        await trio.sleep(LAG_S * 2)
        assert leader.state.isr == REPLICAS
        assert leader.check_produce(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
        store.failure = None  # back: the next check records the shrink
        await trio.sleep(LAG_S)
        isr: tuple[int, ...] = leader.state.isr  # (mypy narrowed it above)
        assert isr == (1,)
        assert leader.check_produce(-1) is ErrorCode.NONE


async def test_a_shrink_waiting_for_zookeeper_refuses_acks_all_until_it_is_recorded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """acks=all is refused before the append, and a produce appended before is answered
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (its producer retries it) rather than timing out."""
    store = FakeIsrStore()
    store.reachable = trio.Event()  # ZooKeeper down: the write waits for the connection
    async with leading(store) as leader, trio.open_nursery() as nursery:
        answers: list[ErrorCode] = []
        nursery.start_soon(produce, leader, 1, answers)
        for _ in range(int(LAG_S * 2) + 5):  # broker 3 silent, broker 2 keeps up
            await trio.sleep(1)
            leader.on_follower_fetch(2, 1)
        # Proposed after LAG_S + LAG_S / 2, the shrink still waits: both refused.
        assert leader.state.pending_isr == (1, 2) and store.written == []
        assert answers == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
        assert leader.check_produce(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
        assert leader.check_produce(1) is ErrorCode.NONE  # acks=1 is still served
        store.reachable.set()  # ZooKeeper back: the shrink is recorded, acks=all served
        await trio.testing.wait_all_tasks_blocked()
        assert leader.state.isr == (1, 2)
        assert leader.check_produce(-1) is ErrorCode.NONE


async def test_a_refused_shrink_no_longer_needed_ends_the_refusal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ZooKeeper refused the shrink, and the follower caught up before it returned: the
    ISR is whole again, so acks=all is served without any change recorded."""
    store = FakeIsrStore()
    store.failure = CoordinationUnavailable("ZooKeeper lost")
    async with leading(store) as leader:
        leader.on_follower_fetch(2, 0)
        leader.on_append(1)
        for _ in range(int(LAG_S * 2)):
            await trio.sleep(1)
            leader.on_follower_fetch(2, 1)
        assert leader.check_produce(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
        leader.on_follower_fetch(3, 1)  # broker 3 caught up
        await trio.sleep(LAG_S)
        assert leader.state.isr == REPLICAS and store.written == []
        assert leader.check_produce(-1) is ErrorCode.NONE


@settings(max_examples=60, deadline=None)
@example(steps=[(2, 0, 20.0)] * 3, records=1)  # both followers silent: the ISR shrinks to 1
@given(
    steps=st.lists(
        st.tuples(st.sampled_from([2, 3]), st.integers(0, 4), st.floats(0, 20)), max_size=25
    ),
    records=st.integers(1, 4),
)
def test_acks_all_is_answered_only_once_every_isr_member_holds_the_records(
    steps: list[tuple[int, int, float]], records: int
) -> None:
    """Followers progress at random; the produce's answer must agree with their logs."""

    async def main() -> None:
        store = FakeIsrStore()
        async with leading(store) as leader, trio.open_nursery() as nursery:
            answers: list[ErrorCode] = []
            at_answer: list[tuple[tuple[int, ...], list[int]]] = []

            async def produce_and_observe() -> None:
                await produce(leader, records, answers)
                state = leader.state  # as the purgatory saw it when it answered
                at_answer.append((state.isr, [state.log_end_of(b) for b in state.maximal_isr]))

            nursery.start_soon(produce_and_observe)
            await trio.testing.wait_all_tasks_blocked()
            offsets = {2: 0, 3: 0}
            for replica, advance, pause in steps:
                offsets[replica] = min(offsets[replica] + advance, records)
                leader.on_follower_fetch(replica, offsets[replica])
                await trio.sleep(pause)
                await trio.testing.wait_all_tasks_blocked()
                if answers and answers != [ErrorCode.REQUEST_TIMED_OUT]:
                    # Answered: every member of the (maximal) ISR holds the records, and
                    # the answer says whether that ISR was as large as asked.
                    ((isr, log_ends),) = at_answer
                    assert all(log_end >= records for log_end in log_ends)
                    enough = len(isr) >= leader.state.settings.min_insync_replicas
                    expected = (
                        ErrorCode.NONE if enough else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                    )
                    assert answers == [expected]
                    nursery.cancel_scope.cancel()
                    return
            if not answers and all(o == records for o in offsets.values()):
                raise AssertionError("every follower holds the records, yet no answer")
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
