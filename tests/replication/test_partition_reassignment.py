"""KIP-455's decisions: the replica set while moving, when a move completes, and going
back on a cancel."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.replication.controller_decisions import PartitionState
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.partition_reassignment import (
    cancel_reassignment,
    cancelled_replicas,
    complete_reassignment,
    epoch_bump,
    start_reassignment,
)
from broker.replication.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def state(replicas: tuple[int, ...], leader: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(TP, replicas, LeaderAndIsr(leader, 4, isr, zk_version=7))


def test_a_move_starts_with_the_targets_first_and_records_what_it_adds_and_removes() -> None:
    start = start_reassignment((1, 2, 3), (3, 4, 5))
    assert start.replicas == (3, 4, 5, 1, 2)
    assert (start.adding, start.removing) == ((4, 5), (1, 2))


def test_starting_bumps_the_leader_epoch_and_keeps_leader_and_isr() -> None:
    update = epoch_bump(state((1, 2, 4), 1, (1, 2)))
    assert (update.leader_and_isr.leader, update.leader_and_isr.isr) == (1, (1, 2))
    assert update.leader_and_isr.leader_epoch == 5


def test_a_move_completes_only_once_every_target_replica_is_in_sync() -> None:
    moving = state((2, 4, 1), 1, (1, 2))
    assert complete_reassignment(moving, (2, 4), live={1, 2, 4}) is None
    done = complete_reassignment(state((2, 4, 1), 1, (1, 2, 4)), (2, 4), live={1, 2, 4})
    assert done is not None
    # The leader was leaving: the first live target replica in sync leads.
    assert (done.leader_and_isr.leader, done.leader_and_isr.isr) == (2, (2, 4))


def test_a_leader_that_stays_keeps_leading() -> None:
    done = complete_reassignment(state((4, 2, 1), 2, (2, 1, 4)), (4, 2), live={1, 2, 4})
    assert done is not None and done.leader_and_isr.leader == 2


def test_a_cancel_goes_back_and_drops_the_added_replicas_from_the_isr() -> None:
    moving = state((3, 4, 1, 2), 1, (1, 2, 4))
    original = cancelled_replicas(moving.replicas, adding=(3, 4))
    assert original == (1, 2)
    back = cancel_reassignment(moving, original, live={1, 2, 3, 4})
    assert back is not None
    assert (back.leader_and_isr.leader, back.leader_and_isr.isr) == (1, (1, 2))


@given(
    current=st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True),
    target=st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True),
    live=st.sets(st.integers(0, 6)),
)
def test_a_completed_move_leaves_only_live_target_replicas_leading_and_in_sync(
    current: list[int], target: list[int], live: set[int]
) -> None:
    start = start_reassignment(current, target)
    assert set(start.replicas) == set(current) | set(target)
    caught_up = state(start.replicas, current[0], start.replicas)
    done = complete_reassignment(caught_up, tuple(target), live)
    if done is None:
        assert not live & set(target)
    else:
        assert done.leader_and_isr.leader in set(target) & live
        assert set(done.leader_and_isr.isr) == set(target)
