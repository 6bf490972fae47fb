"""A partition this broker leads, as Trio runs it (the leader half of Kafka's Partition
with its ISR-expiration task and the produce purgatory).

PartitionLeaderState decides; this carries the decisions out. Follower fetches
and appends come in from the request handlers; an ISR change the state proposes
(a follower caught up, or one lagged past replica.lag.time.max.ms, checked every
half of it) is written to the partition's state znode conditionally on its
zkVersion and then announced under `/isr_change_notification` for the controller
(Kafka 2.x's Partition.shrinkIsr/expandIsr and propagateIsrChanges); waiting
acks=all produces are woken whenever the high watermark may have moved.

A write the controller beat (BadVersionError) ends this leadership's ISR changes:
the controller's newer state arrives as LeaderAndIsr and the broker builds the
partition again from it (`conflict` is set so the wiring can re-read sooner). A
shrink that cannot be recorded (ZooKeeper lost: the write failed, or is still waiting
for the connection after `ISR_WRITE_PATIENCE_S`) refuses acks=all with
NOT_ENOUGH_REPLICAS before the append: the leader may not shrink the ISR on its own,
so it cannot promise acks=all durability without the lagging follower. Kafka 2.x's
leader blocks in the same write (`Partition.maybeShrinkIsr` under the partition's
lock, KafkaZkClient retrying until connected), so its acks=all produces time out
instead; refusing at once tells the producer sooner and keeps the request threads
free. Produces already waiting are answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (at the
next ISR check) rather than left to time out: an idempotent producer retries them with
the same sequence, which the log recognises once they can be acknowledged, where a
request timing out in the client makes it bump its epoch and could write them twice.
The refusal ends when a change is recorded, or when no shrink is needed any more (the
follower caught up).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Protocol

import trio

from broker.coordination.store import BadVersionError, CoordinationUnavailable
from broker.protocol.error_codes import ErrorCode
from broker.replication.delayed_produce import DelayedProduce
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.partition_leader_state import (
    ACKS_ALL,
    AcksAllStatus,
    IsrChangeProposal,
    PartitionLeaderState,
)
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

# How long a shrink's write may wait for ZooKeeper before acks=all is refused: a
# connected ZooKeeper answers within milliseconds.
ISR_WRITE_PATIENCE_S = 1.0


class IsrStore(Protocol):
    """Where a leader records its ISR changes (PartitionStateStore in the broker)."""

    async def update_isr_as_leader(
        self, tp: TopicPartition, leader_and_isr: LeaderAndIsr, controller_epoch: int
    ) -> LeaderAndIsr: ...

    async def propagate_isr_changes(self, partitions: Sequence[TopicPartition]) -> str: ...


class PartitionLeader:
    def __init__(
        self, state: PartitionLeaderState, controller_epoch: int, isr_store: IsrStore
    ) -> None:
        """`controller_epoch` is the one of the LeaderAndIsr that made this broker leader,
        kept in the state znode by the leader's own writes."""
        self.state = state
        self._controller_epoch = controller_epoch
        self._isr_store = isr_store
        self.delayed_produce = DelayedProduce(self._acks_all_status)
        self._proposals_in, self._proposals = trio.open_memory_channel[IsrChangeProposal](math.inf)
        self._isr_unrecordable = False
        self._shrink_written_since: float | None = None
        self.conflict = trio.Event()

    @property
    def topic_partition(self) -> TopicPartition:
        return self.state.topic_partition

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The ISR-expiration check and the ISR writer, until cancelled (leadership ends)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._expire_isr)
            nursery.start_soon(self._write_isr_changes)
            task_status.started()

    # -- produce --
    def check_produce(self, required_acks: int) -> ErrorCode:
        """Before the append: NOT_ENOUGH_REPLICAS below min.insync.replicas, or while an ISR
        change cannot be recorded."""
        if required_acks == ACKS_ALL and (self._isr_unrecordable or self._shrink_stuck()):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return self.state.check_produce(required_acks)

    def on_append(self, log_end_offset: int) -> None:
        if self.state.on_append(log_end_offset):
            self.delayed_produce.check_and_complete()

    def _acks_all_status(self, required_offset: int) -> AcksAllStatus:
        status = self.state.acks_all_status(required_offset)
        if not status.done and (self._isr_unrecordable or self._shrink_stuck()):
            return AcksAllStatus(done=True, error=ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return status

    async def wait_for_acks_all(self, required_offset: int, timeout_s: float) -> ErrorCode:
        """After the append of a produce whose last record is at `required_offset - 1`."""
        return await self.delayed_produce.wait(required_offset, timeout_s)

    # -- followers --
    def on_follower_fetch(self, replica_id: int, fetch_offset: int) -> ErrorCode:
        """A follower's Fetch (replica id set) asked for `fetch_offset`: it holds everything
        before it."""
        outcome = self.state.on_follower_fetch(replica_id, fetch_offset, trio.current_time())
        if outcome.isr_change is not None:
            self._proposals_in.send_nowait(outcome.isr_change)
        if outcome.high_watermark_advanced:
            self.delayed_produce.check_and_complete()
        return outcome.error

    def resign(self) -> None:
        """Leadership moved: every waiting produce answers NOT_LEADER_OR_FOLLOWER."""
        self.delayed_produce.leadership_lost()

    # -- ISR changes --
    async def _expire_isr(self) -> None:
        interval_s = self.state.settings.replica_lag_time_max_ms / 2 / 1000
        while True:
            await trio.sleep(interval_s)
            proposal = self.state.maybe_shrink_isr(trio.current_time())
            if proposal is not None:
                self._proposals_in.send_nowait(proposal)
            elif self.state.pending_isr is None:
                self._isr_unrecordable = False  # every ISR member caught up: nothing to record
            if self._isr_unrecordable or self._shrink_stuck():
                self.delayed_produce.check_and_complete()  # the waiting are refused

    def _shrink_stuck(self) -> bool:
        since = self._shrink_written_since
        return since is not None and trio.current_time() - since > ISR_WRITE_PATIENCE_S

    async def _write_isr_changes(self) -> None:
        async for proposal in self._proposals:
            await self._write(proposal)

    async def _write(self, proposal: IsrChangeProposal) -> None:
        tp = proposal.topic_partition
        shrink = len(proposal.leader_and_isr.isr) < len(self.state.isr)
        self._shrink_written_since = trio.current_time() if shrink else None
        try:
            written = await self._isr_store.update_isr_as_leader(
                tp, proposal.leader_and_isr, self._controller_epoch
            )
        except BadVersionError:
            log.info("%s: the controller changed the state first; ISR change dropped", tp)
            self.state.isr_change_failed()
            self.conflict.set()
            return
        except CoordinationUnavailable as exc:
            log.warning(
                "%s: ISR change to %s not recorded: %s", tp, proposal.leader_and_isr.isr, exc
            )
            self.state.isr_change_failed()
            self._isr_unrecordable = True
            return
        finally:
            self._shrink_written_since = None
        self._isr_unrecordable = False
        log.info("%s: ISR now %s", tp, list(written.isr))
        self.state.isr_change_committed(written)
        self.delayed_produce.check_and_complete()
        try:
            await self._isr_store.propagate_isr_changes([tp])
        except CoordinationUnavailable as exc:
            # The state znode has it; the controller sees it at its next read of the state.
            log.warning("%s: ISR change notification not written: %s", tp, exc)
