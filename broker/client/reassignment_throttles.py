"""Which replicas a reassignment throttles, as kafka-reassign-partitions computes it.

A topic's `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
are set whole by each `--throttle`, so Kafka's tool computes them over every move in
flight: the reassignments already ongoing (ListPartitionReassignments) and those now
asked. A second throttled move of the same topic keeps the first one's throttle.
Sans-IO: the command (`cmd_replicas.py`) fetches the state and applies the result.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

Partition = tuple[str, int]

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


@attrs.frozen
class PartitionMove:
    sources: frozenset[int]  # the replicas that hold the log (the leader sends from them)
    destinations: frozenset[int]  # the replicas being added (they fetch it)


@attrs.frozen
class Ongoing:
    """A reassignment in flight, as ListPartitionReassignments lists it."""

    replicas: tuple[int, ...]  # the old and the new replicas together
    adding: tuple[int, ...]


MoveMap = dict[str, dict[int, PartitionMove]]


def proposed_moves(
    ongoing: Mapping[Partition, Ongoing],
    proposed: Mapping[Partition, tuple[int, ...]],
    current: Mapping[Partition, tuple[int, ...]],
) -> MoveMap:
    """Kafka's calculateProposedMoveMap: every ongoing move, then each proposed one from
    the sources of the move in flight (else the replicas there now). KeyError names a
    proposed partition with no replicas."""
    moves: MoveMap = {}
    for (topic, partition), found in ongoing.items():
        moves.setdefault(topic, {})[partition] = PartitionMove(
            frozenset(found.replicas) - frozenset(found.adding), frozenset(found.adding)
        )
    for (topic, partition), target in proposed.items():
        in_flight = moves.setdefault(topic, {}).get(partition)
        sources = (
            in_flight.sources if in_flight is not None else frozenset(current[(topic, partition)])
        )
        moves[topic][partition] = PartitionMove(sources, frozenset(target) - sources)
    return moves


def throttled_replicas(moves: MoveMap) -> dict[str, dict[str, str]]:
    """Per topic, both lists (`partition:broker,...`, in Kafka's order: sorted as text)."""
    lists: dict[str, dict[str, str]] = {}
    for topic, partitions in moves.items():
        leaders = {f"{p}:{b}" for p, move in partitions.items() for b in move.sources}
        followers = {
            f"{p}:{b}" for p, move in partitions.items() for b in move.destinations - move.sources
        }
        lists[topic] = {
            LEADER_THROTTLED_REPLICAS: ",".join(sorted(leaders)),
            FOLLOWER_THROTTLED_REPLICAS: ",".join(sorted(followers)),
        }
    return lists


def reassigning_brokers(moves: MoveMap) -> set[int]:
    """Every broker that sends or receives: the rates are set on each."""
    return {
        b
        for partitions in moves.values()
        for m in partitions.values()
        for b in m.sources | m.destinations
    }
