"""What the controller writes when brokers come and go (Kafka's KafkaController
onBrokerFailure, controlled shutdown and auto leader rebalance), as pure decisions.

Each decision is a `LeaderAndIsrUpdate`: the new state with a leader epoch one
higher (so every replica can tell it from the one before) and the zkVersion the
state znode must still have, for the caller's conditional write together with
the controller-epoch check (a deposed controller's write fails).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

import attrs

from broker.replication.leader_and_isr import NO_LEADER, LeaderAndIsr
from broker.replication.leader_election import (
    controlled_shutdown_leader_election,
    offline_partition_leader_election,
    preferred_replica_leader_election,
)
from broker.replication.topic_partition import TopicPartition


@attrs.frozen
class PartitionState:
    topic_partition: TopicPartition
    replicas: tuple[int, ...]
    leader_and_isr: LeaderAndIsr


@attrs.frozen
class LeaderAndIsrUpdate:
    topic_partition: TopicPartition
    leader_and_isr: LeaderAndIsr
    unclean: bool = False


def _never_unclean(_topic: str) -> bool:
    return False


def on_broker_failure(
    partitions: Iterable[PartitionState],
    live: Collection[int],
    unclean_leader_election_enable: Callable[[str], bool] = _never_unclean,
) -> list[LeaderAndIsrUpdate]:
    """Elect new leaders where the leader is not live (offline partitions are tried
    again: a returning ISR member brings them back), and drop dead followers from
    the ISR. A partition whose ISR has no live member keeps that ISR and gets no
    leader (-1): it stays offline until one of those brokers, which hold every
    acknowledged record, comes back, rather than lose records to an unclean choice."""
    updates = []
    for state in sorted(partitions, key=lambda s: s.topic_partition):
        current = state.leader_and_isr
        if current.leader in live:
            isr = tuple(b for b in current.isr if b in live)
            if isr != current.isr:
                updates.append(_update(state, current.leader, isr))
            continue
        election = offline_partition_leader_election(
            state.replicas,
            current.isr,
            live,
            unclean_leader_election_enable=unclean_leader_election_enable(
                state.topic_partition.topic
            ),
        )
        if election is not None:
            updates.append(_update(state, election.leader, election.isr, unclean=election.unclean))
        elif current.leader != NO_LEADER:
            updates.append(_update(state, NO_LEADER, current.isr))
    return updates


@attrs.frozen
class ControlledShutdownDecision:
    updates: list[LeaderAndIsrUpdate]
    # Partitions the broker still leads (no other ISR member is live): the
    # ControlledShutdown answer lists them and the broker retries, then goes anyway.
    partitions_remaining: list[TopicPartition]


def on_controlled_shutdown(
    partitions: Iterable[PartitionState],
    live: Collection[int],
    shutting_down: Collection[int],
) -> ControlledShutdownDecision:
    updates = []
    remaining = []
    for state in sorted(partitions, key=lambda s: s.topic_partition):
        current = state.leader_and_isr
        if current.leader in shutting_down:
            if len(state.replicas) <= 1:
                continue  # nowhere to move it: it goes offline with the broker
            election = controlled_shutdown_leader_election(
                state.replicas, current.isr, live, shutting_down
            )
            if election is None:
                remaining.append(state.topic_partition)
            else:
                updates.append(_update(state, election.leader, election.isr))
        elif any(b in shutting_down for b in current.isr) and current.leader != NO_LEADER:
            isr = tuple(b for b in current.isr if b not in shutting_down)
            updates.append(_update(state, current.leader, isr))
    return ControlledShutdownDecision(updates, remaining)


def preferred_replica_election(
    partitions: Iterable[PartitionState], live: Collection[int]
) -> list[LeaderAndIsrUpdate]:
    """ElectLeaders (PREFERRED) and the auto rebalance: lead from the first replica
    where it is live, in sync and not leading already."""
    updates = []
    for state in sorted(partitions, key=lambda s: s.topic_partition):
        current = state.leader_and_isr
        if state.replicas and current.leader == state.replicas[0]:
            continue
        election = preferred_replica_leader_election(state.replicas, current.isr, live)
        if election is not None:
            updates.append(_update(state, election.leader, election.isr))
    return updates


def imbalanced_partitions(
    partitions: Iterable[PartitionState],
    live: Collection[int],
    shutting_down: Collection[int],
    leader_imbalance_per_broker_percentage: int = 10,
) -> list[PartitionState]:
    """auto.leader.rebalance.enable's check: for each broker, the share of the partitions
    it should lead that it does not; above the percentage, those partitions are
    candidates for `preferred_replica_election` (while it is live and not leaving)."""
    by_preferred: dict[int, list[PartitionState]] = {}
    for state in partitions:
        if state.replicas:
            by_preferred.setdefault(state.replicas[0], []).append(state)
    candidates = []
    for broker_id, preferred in sorted(by_preferred.items()):
        if broker_id not in live or broker_id in shutting_down:
            continue
        not_led = [s for s in preferred if s.leader_and_isr.leader != broker_id]
        ratio = len(not_led) / len(preferred)
        if ratio > leader_imbalance_per_broker_percentage / 100:
            candidates += [s for s in not_led if broker_id in s.leader_and_isr.isr]
    return sorted(candidates, key=lambda s: s.topic_partition)


def _update(
    state: PartitionState, leader: int, isr: tuple[int, ...], *, unclean: bool = False
) -> LeaderAndIsrUpdate:
    new = state.leader_and_isr.new_leader_and_isr(leader, isr)
    return LeaderAndIsrUpdate(state.topic_partition, new, unclean)
