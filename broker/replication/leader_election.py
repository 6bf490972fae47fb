"""The controller's leader choices (Kafka's PartitionLeaderElectionAlgorithms).

Every choice walks the assignment in order, so the preferred replica (the first)
wins whenever it may, and leadership drifts back to where placement spread it.
A clean choice takes only an ISR member: every acknowledged record is on every
ISR member, so a clean leader loses none. An unclean one (only when the topic
sets unclean.leader.election.enable) takes any live replica and may lose some.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

from broker.replication.leader_and_isr import NO_LEADER


@attrs.frozen
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


def offline_partition_leader_election(
    replicas: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    *,
    unclean_leader_election_enable: bool = False,
) -> Election | None:
    """The leader is gone: the first live ISR member, else (unclean) the first live
    replica with an ISR of itself alone; None when no replica may lead."""
    for broker_id in replicas:
        if broker_id in live and broker_id in isr:
            return Election(broker_id, tuple(b for b in isr if b in live))
    if unclean_leader_election_enable:
        for broker_id in replicas:
            if broker_id in live:
                return Election(broker_id, (broker_id,), unclean=True)
    return None


def controlled_shutdown_leader_election(
    replicas: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    """Leadership moves to the first live ISR member not shutting down; the brokers
    shutting down leave the ISR, so no acks=all produce waits on them."""
    for broker_id in replicas:
        if broker_id in live and broker_id in isr and broker_id not in shutting_down:
            return Election(broker_id, tuple(b for b in isr if b not in shutting_down))
    return None


def preferred_replica_leader_election(
    replicas: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    """Only the preferred replica itself, and only if it is live and in sync."""
    if replicas and replicas[0] in live and replicas[0] in isr:
        return Election(replicas[0], tuple(isr))
    return None
