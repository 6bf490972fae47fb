"""Moving a partition's replicas (KIP-455, Kafka 2.4+'s controller), as pure decisions.

A reassignment from the replicas RS to the target TRS goes in two steps:

1. **Start**: the partition's replicas become TRS followed by the rest of RS, with
   `adding` = TRS - RS and `removing` = RS - TRS recorded beside them (the topic
   znode's `adding_replicas` / `removing_replicas`), and the leader epoch is bumped
   with leader and ISR unchanged, so the leader tracks the new followers, which start
   fetching and join the ISR once caught up.
2. **Completion**, once every target replica is in the ISR: the leader stays if it is
   a live target replica, else the first live target replica in the ISR leads; the
   ISR keeps only target replicas; the replicas become TRS. The removed replicas
   stop and delete their logs as they see they are no longer replicas.

Cancelling before completion goes back to RS (the replicas less `adding`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

from broker.replication.controller_decisions import LeaderAndIsrUpdate, PartitionState


@attrs.frozen
class ReassignmentStart:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def start_reassignment(replicas: Sequence[int], target: Sequence[int]) -> ReassignmentStart:
    full = tuple(dict.fromkeys([*target, *replicas]))
    adding = tuple(b for b in target if b not in replicas)
    removing = tuple(b for b in replicas if b not in target)
    return ReassignmentStart(full, adding, removing)


def epoch_bump(state: PartitionState) -> LeaderAndIsrUpdate:
    """Leader and ISR as they are, a new leader epoch: the replica set changed."""
    current = state.leader_and_isr
    return LeaderAndIsrUpdate(
        state.topic_partition, current.new_leader_and_isr(current.leader, current.isr)
    )


def complete_reassignment(
    state: PartitionState, target: Sequence[int], live: Collection[int]
) -> LeaderAndIsrUpdate | None:
    """The final leader and ISR, or None while some target replica is not in sync
    (or no target replica can lead)."""
    current = state.leader_and_isr
    if not set(target) <= set(current.isr):
        return None
    isr = tuple(b for b in current.isr if b in target)
    if current.leader in target and current.leader in live:
        leader = current.leader
    else:
        candidates = [b for b in target if b in isr and b in live]
        if not candidates:
            return None
        leader = candidates[0]
    return LeaderAndIsrUpdate(state.topic_partition, current.new_leader_and_isr(leader, isr))


def cancelled_replicas(replicas: Sequence[int], adding: Collection[int]) -> tuple[int, ...]:
    return tuple(b for b in replicas if b not in adding)


def cancel_reassignment(
    state: PartitionState, original: Sequence[int], live: Collection[int]
) -> LeaderAndIsrUpdate | None:
    """Back to the replicas before: the added ones leave the ISR; the leader stays unless
    it was an added one (then the first live original replica in sync leads). None
    when nothing changes."""
    current = state.leader_and_isr
    isr = tuple(b for b in current.isr if b in original)
    leader = current.leader
    if leader not in original or leader not in live:
        leader = next((b for b in original if b in isr and b in live), current.leader)
    if (leader, isr) == (current.leader, current.isr):
        return None
    return LeaderAndIsrUpdate(state.topic_partition, current.new_leader_and_isr(leader, isr))
