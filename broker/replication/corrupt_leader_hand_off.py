"""A leader whose log holds a corrupt batch gives its leadership to an in-sync replica.

Kafka has no repair: its broker sends log bytes unread, and recovery truncates at
the first invalid batch. Here a leader that meets a corrupt batch (on a read, or at
start-up: docs/corrupt-data.md) cannot serve those offsets, while every other ISR
member holds them (below the high watermark by the ISR's definition; above it no
acks=all producer was answered yet, as with any leader change). So it hands the
partition to the first live ISR member in replica order, with a new leader epoch, and
leaves the ISR itself, exactly as a controlled shutdown of this one partition would
(`controlled_shutdown_leader_election`); as a follower it then truncates below the
corrupt batch and fetches the new leader's copy (broker/log/follower_log.py). Without
another live ISR member there is nothing to repair from: None, and reads answer
CORRUPT_MESSAGE as on a single host.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.leader_election import controlled_shutdown_leader_election


def corrupt_leader_hand_off(
    node_id: int, replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int]
) -> LeaderAndIsr | None:
    """The state `node_id` writes to give up leading a partition whose log it found
    corrupt (conditional on `current`'s zkVersion), or None: not its leader, or no
    other live ISR member can take it."""
    if current.leader != node_id:
        return None
    election = controlled_shutdown_leader_election(replicas, current.isr, live, (node_id,))
    if election is None:
        return None
    return current.new_leader_and_isr(election.leader, election.isr)
