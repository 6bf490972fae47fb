"""The controller's part in the admin APIs under `zookeeper.connect`: topic deletion,
leader elections asked for, and partition reassignments, each requested through a znode
the controller watches (Kafka 2.x's `/admin/...` paths).

A mixin of `KafkaController` (broker/coordination/kafka_controller.py), which owns the
event loop, the cached partition states and the fenced `_write`; kept apart so the
controller's own decisions (failover, controlled shutdown, rebalance) read on their own.
Each method runs as one event of the controller's inbox.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable

import attrs
import trio

from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.partition_state_store import PartitionStateStore, Reassignment
from broker.coordination.partition_state_znodes import PREFERRED_REPLICA_ELECTION_PATH
from broker.coordination.store import NoNodeError, WatchEvent
from broker.replication.controller_decisions import (
    LeaderAndIsrUpdate,
    PartitionState,
    on_broker_failure,
    preferred_replica_election,
)
from broker.replication.partition_reassignment import (
    cancel_reassignment,
    cancelled_replicas,
    complete_reassignment,
    epoch_bump,
    start_reassignment,
)
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Decide = Callable[[Iterable[PartitionState]], list[LeaderAndIsrUpdate]]


class AdminRequests:
    # The controller's, valid while it is active.
    _states: PartitionStateStore
    _partitions: dict[TopicPartition, PartitionState]
    _live: frozenset[int]
    # Reassignments this controller follows (started by it, or in flight when it became
    # controller), to their target replicas.
    _reassigning: dict[TopicPartition, tuple[int, ...]]
    # Whether those in flight under an earlier controller were taken over (once, on the
    # first reassignment event after activation).
    _reassignments_adopted: bool

    async def _write(self, decide: Decide, partitions: Iterable[PartitionState]) -> None:
        raise NotImplementedError  # KafkaController's fenced write

    async def _on_topic_deletion(self, watch: trio.MemorySendChannel[WatchEvent]) -> None:
        """DeleteTopics marked topics under `/admin/delete_topics`: forget their partitions
        and delete their znodes; every broker deletes its replicas' logs when the topic
        leaves its view (brokers watch the znodes instead of receiving StopReplica)."""
        for topic in await self._states.topics_to_delete(watch=watch):
            doomed = [tp for tp in self._partitions if tp.topic == topic]
            for tp in doomed:
                del self._partitions[tp]
            await self._states.delete_topic(topic)
            log.info("controller: deleted topic %s (%d partitions)", topic, len(doomed))

    async def _on_leader_election(
        self, path: str, watch: trio.MemorySendChannel[WatchEvent]
    ) -> None:
        """ElectLeaders asked (through `path`): PREFERRED leads from the first replica where
        it is live and in sync; UNCLEAN elects where no live leader is left, from the ISR
        if it can, else from any live replica."""
        try:
            asked = await self._states.leader_election_request(path, watch=watch)
        except MalformedZnode as exc:
            log.error("controller ignores %s", exc)
            await self._states.delete_leader_election_request(path)
            return
        if not asked:
            return
        states = [self._partitions[tp] for tp in asked if tp in self._partitions]

        def decide(partitions: Iterable[PartitionState]) -> list[LeaderAndIsrUpdate]:
            if path == PREFERRED_REPLICA_ELECTION_PATH:
                return preferred_replica_election(partitions, self._live)
            return on_broker_failure(partitions, self._live, lambda _topic: True)

        await self._write(decide, states)
        log.info("controller: leader election of %d partitions (%s)", len(states), path)
        await self._states.delete_leader_election_request(path)

    async def _on_reassignment(self, watch: trio.MemorySendChannel[WatchEvent]) -> None:
        """`/admin/reassign_partitions` changed: start what is new (KIP-455's first step,
        `partition_reassignment.py`), revert what was withdrawn, then complete what can."""
        try:
            asked = await self._states.partition_reassignment(watch=watch)
        except MalformedZnode as exc:
            log.error("controller ignores %s", exc)
            return
        if not self._reassignments_adopted:
            await self._adopt_reassignments()
            self._reassignments_adopted = True
        for tp, target in sorted(self._reassigning.items()):
            if asked.get(tp) != target:  # cancelled, or replaced by another target
                await self._finish_reassignment(tp, None, forget=tp not in asked)
        for tp, target in sorted(asked.items()):
            state = self._partitions.get(tp)
            if tp in self._reassigning:
                continue
            if state is None or tuple(state.replicas) == tuple(target):
                await self._forget_reassignment(tp)
                continue
            start = start_reassignment(state.replicas, target)
            try:
                await self._states.update_topic_assignment(
                    tp.topic,
                    {tp.partition: start.replicas},
                    {tp.partition: start.adding},
                    {tp.partition: start.removing},
                )
            except NoNodeError:  # the topic was deleted meanwhile
                await self._forget_reassignment(tp)
                continue
            self._partitions[tp] = attrs.evolve(state, replicas=start.replicas)
            self._reassigning[tp] = tuple(target)
            log.info("controller: reassigning %s from %s to %s", tp, state.replicas, target)
            await self._write(
                lambda states: [epoch_bump(s) for s in states], [self._partitions[tp]]
            )
        await self._complete_reassignments()

    async def _adopt_reassignments(self) -> None:
        """Reassignments an earlier controller started and did not finish, as the topic
        znodes record them (`adding_replicas` / `removing_replicas`), followed from here
        as if this controller had started them (Kafka's initializePartitionReassignments):
        one still asked completes; one no longer asked (cancelled, perhaps while no
        controller was active) is reverted to the replicas before it; one asked with
        another target is reverted and started again from those."""
        for topic in sorted({tp.topic for tp in self._partitions}):
            try:
                assignment = await self._states.topic_assignment(topic)
            except MalformedZnode as exc:
                log.error("controller ignores %s", exc)
                continue
            if assignment is None:
                continue
            moving = set(assignment.adding_replicas) | set(assignment.removing_replicas)
            for partition in sorted(moving):
                tp = TopicPartition(topic, partition)
                state = self._partitions.get(tp)
                if state is None or tp in self._reassigning:
                    continue
                removing = assignment.removing_replicas.get(partition, ())
                self._reassigning[tp] = tuple(b for b in state.replicas if b not in removing)
                log.info(
                    "controller: takes over the reassignment of %s to %s",
                    tp,
                    list(self._reassigning[tp]),
                )

    async def _complete_reassignments(self) -> None:
        for tp, target in sorted(self._reassigning.items()):
            state = self._partitions.get(tp)
            if state is None:
                del self._reassigning[tp]
                continue
            if complete_reassignment(state, target, self._live) is not None:
                await self._finish_reassignment(tp, target)

    async def _finish_reassignment(
        self, tp: TopicPartition, target: tuple[int, ...] | None, *, forget: bool = True
    ) -> None:
        """Completed (to `target`) or cancelled (None: back to the replicas before);
        `forget` takes it out of `/admin/reassign_partitions`."""
        state = self._partitions[tp]
        completing = target is not None
        if target is None:
            assignment = await self._states.topic_assignment(tp.topic)
            adding = () if assignment is None else assignment.adding_replicas.get(tp.partition, ())
            target = original = cancelled_replicas(state.replicas, adding)

            def decide(states: Iterable[PartitionState]) -> list[LeaderAndIsrUpdate]:
                updates = (cancel_reassignment(s, original, self._live) for s in states)
                return [u for u in updates if u is not None]
        else:
            final = target

            def decide(states: Iterable[PartitionState]) -> list[LeaderAndIsrUpdate]:
                updates = (complete_reassignment(s, final, self._live) for s in states)
                return [u for u in updates if u is not None]

        await self._write(decide, [state])
        written = self._partitions[tp].leader_and_isr
        if completing and not (set(written.isr) <= set(target) and written.leader in target):
            # The leader changed the ISR since it was read (a target replica fell out):
            # the assignment waits, so no broker sees replicas that exclude an ISR member;
            # the next ISR change completes it (`_complete_reassignments`).
            log.info("controller: %s not yet movable to %s (ISR %s)", tp, target, written.isr)
            return
        with contextlib.suppress(NoNodeError):  # deleted meanwhile: nothing to record
            await self._states.update_topic_assignment(tp.topic, {tp.partition: target}, {}, {})
        self._partitions[tp] = attrs.evolve(self._partitions[tp], replicas=tuple(target))
        log.info("controller: %s now on replicas %s", tp, list(target))
        self._reassigning.pop(tp, None)
        if forget:
            await self._forget_reassignment(tp)

    async def _forget_reassignment(self, tp: TopicPartition) -> None:
        self._reassigning.pop(tp, None)

        def without(pending: dict[TopicPartition, tuple[int, ...]]) -> Reassignment:
            pending.pop(tp, None)
            return pending

        await self._states.update_partition_reassignment(without)
