"""A leader's replica state for one partition (the leader half of Kafka's Partition).

It decides, and the caller records: ISR changes come out as `IsrChangeProposal`s
naming the state znode's version, which the caller writes conditionally (through
the controller's path or the store) and reports back with `isr_change_committed`
or `isr_change_failed`. One change is in flight at a time, as with Kafka's
AlterIsr. While one is, the high watermark is computed over the *maximal* ISR
(the recorded one plus any replica being added), so a replica on its way in can
never find the high watermark beyond its log end, and a replica on its way out
keeps holding it back until ZooKeeper says it is out.

The high watermark is the smallest log end in that ISR and never moves back
within a leadership. Time is passed in (`trio.current_time()` by the caller).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from broker.protocol.error_codes import ErrorCode
from broker.replication.follower_replica import FollowerReplica
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

ACKS_ALL = -1


@attrs.frozen
class IsrChangeProposal:
    """Write `leader_and_isr` to the state znode only if its version is still
    `leader_and_isr.zk_version`: a controller that moved leadership meanwhile wins."""

    topic_partition: TopicPartition
    leader_and_isr: LeaderAndIsr


@attrs.frozen
class FollowerFetchOutcome:
    error: ErrorCode
    high_watermark_advanced: bool = False
    isr_change: IsrChangeProposal | None = None


@attrs.frozen
class AcksAllStatus:
    """`done` once every ISR member has the records; `error` is
    NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas
    meanwhile (the records are written but not as durably as asked)."""

    done: bool
    error: ErrorCode = ErrorCode.NONE


@attrs.frozen
class LeaderSettings:
    replica_lag_time_max_ms: int = 30000
    min_insync_replicas: int = 1


class PartitionLeaderState:
    def __init__(
        self,
        topic_partition: TopicPartition,
        local_broker_id: int,
        replicas: Sequence[int],
        leader_and_isr: LeaderAndIsr,
        *,
        log_end_offset: int,
        high_watermark: int,
        now: float,
        settings: LeaderSettings,
        removing: Sequence[int] = (),
    ) -> None:
        """`removing`: replicas a reassignment is taking away (the topic znode's
        `removing_replicas`), which never join the ISR again (`_maybe_expand_isr`)."""
        if leader_and_isr.leader != local_broker_id:
            raise ValueError(f"{topic_partition}: broker {local_broker_id} is not its leader")
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.replicas = tuple(replicas)
        self.removing = frozenset(removing)
        self.leader_and_isr = leader_and_isr
        self.settings = settings
        self.log_end_offset = log_end_offset
        # The first offset of this leadership: a follower joins the ISR only once it has
        # everything the earlier leaders left to this one (Kafka's KAFKA-7128 rule), so a
        # replica elected from the ISR later never lacks a record this leader started with.
        self.leader_epoch_start_offset = log_end_offset
        self.high_watermark = min(high_watermark, log_end_offset)
        self.pending_isr: tuple[int, ...] | None = None
        # An ISR member outside the replicas (a state written before the assignment
        # caught up with it) is still followed: the high watermark waits for every ISR
        # member, so acks=all keeps its promise, and the member leaves the ISR by lagging
        # once it stops fetching. It never joins the ISR again (`_maybe_expand_isr`).
        self.followers = {
            broker_id: FollowerReplica.at_leadership_start(
                broker_id, in_isr=broker_id in leader_and_isr.isr, now=now
            )
            for broker_id in dict.fromkeys([*self.replicas, *leader_and_isr.isr])
            if broker_id != local_broker_id
        }
        self._maybe_increment_high_watermark()

    def assignment_changed(
        self, replicas: Sequence[int], removing: Sequence[int], now: float
    ) -> None:
        """The topic znode changed within this leader epoch (a reassignment completed or
        was cancelled): a replica added is followed from now on, outside the ISR."""
        self.replicas = tuple(replicas)
        self.removing = frozenset(removing)
        for broker_id in self.replicas:
            if broker_id != self.local_broker_id and broker_id not in self.followers:
                self.followers[broker_id] = FollowerReplica.at_leadership_start(
                    broker_id, in_isr=False, now=now
                )

    @property
    def isr(self) -> tuple[int, ...]:
        return self.leader_and_isr.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return frozenset(self.isr) | frozenset(self.pending_isr or ())

    # -- produce --
    def check_produce(self, required_acks: int) -> ErrorCode:
        """Before the append: acks=all below min.insync.replicas is refused unwritten."""
        if required_acks == ACKS_ALL and len(self.isr) < self.settings.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def on_append(self, log_end_offset: int) -> bool:
        """The local log grew; True if the high watermark advanced (alone in the ISR)."""
        self.log_end_offset = max(self.log_end_offset, log_end_offset)
        return self._maybe_increment_high_watermark()

    def acks_all_status(self, required_offset: int) -> AcksAllStatus:
        """For a produce whose last record is at `required_offset - 1`."""
        if self.high_watermark < required_offset:
            return AcksAllStatus(done=False)
        if len(self.isr) < self.settings.min_insync_replicas:
            return AcksAllStatus(done=True, error=ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return AcksAllStatus(done=True)

    # -- followers --
    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, now: float
    ) -> FollowerFetchOutcome:
        follower = self.followers.get(replica_id)
        if follower is None:
            return FollowerFetchOutcome(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if not 0 <= fetch_offset <= self.log_end_offset:
            return FollowerFetchOutcome(ErrorCode.OFFSET_OUT_OF_RANGE)
        self.followers[replica_id] = follower.after_fetch(fetch_offset, self.log_end_offset, now)
        isr_change = self._maybe_expand_isr(replica_id)
        advanced = self._maybe_increment_high_watermark()
        return FollowerFetchOutcome(ErrorCode.NONE, advanced, isr_change)

    def out_of_sync_replicas(self, now: float) -> tuple[int, ...]:
        """ISR followers that have not been caught up for replica.lag.time.max.ms. A
        replica holding the leader's whole log stays, however long ago it fetched: with
        no new records there is nothing to lag behind (a dead broker leaves by the
        controller). A member that is no longer a replica (a reassignment moved it off
        while it was in the ISR) gets no such grace: it stops fetching, and leaves."""
        lag_max_s = self.settings.replica_lag_time_max_ms / 1000
        return tuple(
            broker_id
            for broker_id in self.isr
            if broker_id != self.local_broker_id
            and (
                self.followers[broker_id].log_end_offset != self.log_end_offset
                or broker_id not in self.replicas
            )
            and self.followers[broker_id].lag_s(now) > lag_max_s
        )

    def maybe_shrink_isr(self, now: float) -> IsrChangeProposal | None:
        """Kafka's periodic isr-expiration check (every replica.lag.time.max.ms / 2)."""
        if self.pending_isr is not None:
            return None
        out_of_sync = self.out_of_sync_replicas(now)
        if not out_of_sync:
            return None
        return self._propose(tuple(b for b in self.isr if b not in out_of_sync))

    def isr_change_committed(self, leader_and_isr: LeaderAndIsr) -> bool:
        """The proposal was written; `leader_and_isr` carries the znode's new version.
        True if the high watermark advanced (a slow replica no longer holds it)."""
        self.leader_and_isr = leader_and_isr
        self.pending_isr = None
        return self._maybe_increment_high_watermark()

    def isr_change_failed(self) -> None:
        """The conditional write lost (the controller wrote first): the caller re-reads
        the state and either becomes follower or builds the state again."""
        self.pending_isr = None

    def _maybe_expand_isr(self, replica_id: int) -> IsrChangeProposal | None:
        if self.pending_isr is not None or replica_id in self.isr:
            return None
        # A replica being removed is not taken back: the controller completes the move by
        # writing an ISR without it, and the assignment without it after; a leader that
        # took it back in between would keep a non-replica in the ISR.
        if replica_id not in self.replicas or replica_id in self.removing:
            return None
        log_end = self.followers[replica_id].log_end_offset
        if log_end < self.high_watermark or log_end < self.leader_epoch_start_offset:
            return None
        return self._propose((*self.isr, replica_id))

    def _propose(self, isr: tuple[int, ...]) -> IsrChangeProposal:
        self.pending_isr = isr
        return IsrChangeProposal(self.topic_partition, self.leader_and_isr.with_isr(isr))

    def log_end_of(self, broker_id: int) -> int:
        if broker_id == self.local_broker_id:
            return self.log_end_offset
        return self.followers[broker_id].log_end_offset

    def _maybe_increment_high_watermark(self) -> bool:
        candidate = min(self.log_end_of(b) for b in self.maximal_isr | {self.local_broker_id})
        if candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        return True
