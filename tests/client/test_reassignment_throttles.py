"""The throttled-replica lists of a reassignment, computed as kafka-reassign-partitions
does: over the moves asked and those already ongoing, so a second throttled move of a
topic keeps the first one's throttle."""

from __future__ import annotations

from broker.client.reassignment_throttles import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    Ongoing,
    PartitionMove,
    proposed_moves,
    reassigning_brokers,
    throttled_replicas,
)


def test_a_move_throttles_the_leader_on_its_replicas_and_the_follower_on_those_added() -> None:
    moves = proposed_moves({}, {("t", 0): (2, 3)}, {("t", 0): (1, 2)})
    assert moves == {"t": {0: PartitionMove(frozenset({1, 2}), frozenset({3}))}}
    assert throttled_replicas(moves) == {
        "t": {LEADER_THROTTLED_REPLICAS: "0:1,0:2", FOLLOWER_THROTTLED_REPLICAS: "0:3"}
    }
    assert reassigning_brokers(moves) == {1, 2, 3}


def test_the_lists_cover_the_reassignments_ongoing_as_well_as_those_asked() -> None:
    ongoing = {("t", 0): Ongoing(replicas=(1, 2), adding=(2,)), ("u", 3): Ongoing((4, 5), (5,))}
    moves = proposed_moves(ongoing, {("t", 1): (2, 1)}, {("t", 1): (2,)})
    assert throttled_replicas(moves) == {
        "t": {LEADER_THROTTLED_REPLICAS: "0:1,1:2", FOLLOWER_THROTTLED_REPLICAS: "0:2,1:1"},
        "u": {LEADER_THROTTLED_REPLICAS: "3:4", FOLLOWER_THROTTLED_REPLICAS: "3:5"},
    }
    assert reassigning_brokers(moves) == {1, 2, 4, 5}


def test_a_partition_moved_again_keeps_the_sources_of_the_move_in_flight() -> None:
    """Its log is still only on the replicas the first move started from."""
    ongoing = {("t", 0): Ongoing(replicas=(1, 2), adding=(2,))}
    moves = proposed_moves(ongoing, {("t", 0): (3,)}, {("t", 0): (1, 2)})
    assert moves["t"][0] == PartitionMove(frozenset({1}), frozenset({3}))


def test_lists_are_sorted_as_text_as_kafkas_tool_writes_them() -> None:
    moves = proposed_moves(
        {}, {("t", 10): (1, 2), ("t", 2): (1, 2)}, {("t", 10): (1,), ("t", 2): (1,)}
    )
    assert throttled_replicas(moves)["t"][LEADER_THROTTLED_REPLICAS] == "10:1,2:1"
