"""The pieces together: three replicas of one partition, producers with acks=all,
followers fetching through their state machines, and brokers killed and restarted,
with the controller electing as `on_broker_failure` decides. No acknowledged record is
ever lost and the ISR's logs agree up to the high watermark, whatever the order."""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker.protocol.error_codes import ErrorCode
from broker.replication.controller_decisions import PartitionState, on_broker_failure
from broker.replication.fetcher_partition_state import (
    AppendAsFollower,
    EpochEndOffsetAnswered,
    Event,
    FetchAnswered,
    LeaderOffsetsAnswered,
    LocalLog,
    PartitionFetchState,
    Poll,
    RemovePartition,
    SendFetch,
    SendListOffsets,
    SendOffsetsForLeaderEpoch,
    Truncate,
    TruncateFullyAndStartAt,
    UpdateHighWatermark,
    on_event,
)
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.leader_epoch_cache import LeaderEpochCache
from broker.replication.leader_epoch_check import check_current_leader_epoch
from broker.replication.partition_leader_state import (
    ACKS_ALL,
    IsrChangeProposal,
    LeaderSettings,
    PartitionLeaderState,
)
from broker.replication.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
REPLICAS = (1, 2, 3)
LAG_MS = 10_000
Record = tuple[int, int]  # (leader epoch, unique id)


class Replica:
    """One broker's durable log of the partition, its epoch cache and high watermark."""

    def __init__(self) -> None:
        self.log: list[Record] = []
        self.epochs = LeaderEpochCache()
        self.high_watermark = 0

    def append(self, records: list[Record]) -> None:
        for record in records:
            self.epochs.assign(record[0], len(self.log))
            self.log.append(record)

    def truncate(self, offset: int) -> None:
        del self.log[offset:]
        self.epochs.truncate_from_end(offset)
        self.high_watermark = min(self.high_watermark, offset)

    def local_log(self) -> LocalLog:
        return LocalLog(0, len(self.log), self.high_watermark, self.epochs)


class ReplicationModel(RuleBasedStateMachine):
    @initialize(min_isr=st.sampled_from([1, 2]))
    def start(self, min_isr: int) -> None:
        self.settings = LeaderSettings(LAG_MS, min_isr)
        self.now = 0.0
        self.ids = itertools.count()
        self.replicas = {b: Replica() for b in REPLICAS}
        self.live = set(REPLICAS)
        self.state = LeaderAndIsr(1, 0, REPLICAS, zk_version=0)  # the state znode
        self.leader: PartitionLeaderState | None = None
        self.fetchers: dict[int, PartitionFetchState] = {}
        self.pending: list[tuple[int, list[Record]]] = []
        self.acknowledged: dict[int, Record] = {}  # offset -> record
        self.proposal: IsrChangeProposal | None = None
        self._take_roles()

    # -- the controller and the brokers it tells --
    def _take_roles(self) -> None:
        """Every broker acts on the state znode as a LeaderAndIsr request would tell it."""
        self.proposal = None
        self.pending.clear()  # the old leadership's produces are answered with an error
        self.leader = None
        self.fetchers = {}
        leader_id = self.state.leader
        if leader_id not in self.live:
            return
        replica = self.replicas[leader_id]
        replica.epochs.assign(self.state.leader_epoch, len(replica.log))
        self.leader = PartitionLeaderState(
            TP,
            leader_id,
            REPLICAS,
            self.state,
            log_end_offset=len(replica.log),
            high_watermark=replica.high_watermark,
            now=self.now,
            settings=self.settings,
        )
        for broker_id in self.live - {leader_id}:
            self._follow(broker_id)

    def _follow(self, broker_id: int) -> None:
        self.fetchers[broker_id] = PartitionFetchState.start_following(
            self.state.leader, self.state.leader_epoch, len(self.replicas[broker_id].log)
        )

    def _controller(self) -> None:
        partition = PartitionState(TP, REPLICAS, self.state)
        updates = on_broker_failure([partition], self.live)
        for update in updates:
            assert update.leader_and_isr.zk_version == self.state.zk_version
            new = update.leader_and_isr
            self.state = LeaderAndIsr(new.leader, new.leader_epoch, new.isr, new.zk_version + 1)
        if updates:
            self._take_roles()

    def _record_isr_change(self, proposal: IsrChangeProposal | None) -> None:
        if proposal is not None:
            assert self.proposal is None
            self.proposal = proposal

    def _complete_produces(self) -> None:
        assert self.leader is not None
        self.replicas[self.leader.local_broker_id].high_watermark = self.leader.high_watermark
        still_waiting = []
        for required, records in self.pending:
            status = self.leader.acks_all_status(required)
            if not status.done:
                still_waiting.append((required, records))
            elif status.error is ErrorCode.NONE:
                first = required - len(records)
                self.acknowledged.update(zip(range(first, required), records, strict=True))
        self.pending = still_waiting

    # -- rules --
    @precondition(lambda self: self.leader is not None)
    @rule(count=st.integers(1, 3))
    def produce(self, count: int) -> None:
        assert self.leader is not None
        if self.leader.check_produce(ACKS_ALL) is not ErrorCode.NONE:
            return
        records = [(self.state.leader_epoch, next(self.ids)) for _ in range(count)]
        replica = self.replicas[self.leader.local_broker_id]
        replica.append(records)
        self.leader.on_append(len(replica.log))
        self.pending.append((len(replica.log), records))
        self._complete_produces()

    @rule(broker_id=st.sampled_from(REPLICAS), max_records=st.integers(1, 4))
    def follower_round(self, broker_id: int, max_records: int = 4) -> None:
        if broker_id in self.fetchers:
            self._deliver(broker_id, Poll(), max_records)

    def _deliver(self, broker_id: int, event: Event, max_records: int) -> None:
        replica = self.replicas[broker_id]
        transition = on_event(self.fetchers[broker_id], event, replica.local_log(), self.now)
        if transition.state is None:
            del self.fetchers[broker_id]
        else:
            self.fetchers[broker_id] = transition.state
        for action in transition.actions:
            answer = self._carry_out(broker_id, action, max_records)
            if answer is not None and broker_id in self.fetchers:
                self._deliver(broker_id, answer, max_records)

    def _carry_out(self, broker_id: int, action: object, max_records: int) -> Event | None:
        replica = self.replicas[broker_id]
        assert self.leader is not None
        leader_log = self.replicas[self.leader.local_broker_id].log
        epoch = self.leader.leader_and_isr.leader_epoch
        if isinstance(action, Truncate | TruncateFullyAndStartAt):
            replica.truncate(action.offset)
        elif isinstance(action, AppendAsFollower):
            replica.append(leader_log[len(replica.log) : action.end_offset])
        elif isinstance(action, UpdateHighWatermark):
            replica.high_watermark = max(replica.high_watermark, action.high_watermark)
        elif isinstance(action, SendOffsetsForLeaderEpoch):
            error = check_current_leader_epoch(action.current_leader_epoch, epoch)
            answer = self.replicas[self.leader.local_broker_id].epochs.end_offset_for(
                action.leader_epoch, len(leader_log)
            )
            return EpochEndOffsetAnswered(action.current_leader_epoch, error, answer)
        elif isinstance(action, SendFetch):
            outcome = self.leader.on_follower_fetch(broker_id, action.fetch_offset, self.now)
            if outcome.error is not ErrorCode.NONE:
                return FetchAnswered(action.current_leader_epoch, outcome.error)
            self._record_isr_change(outcome.isr_change)
            self._complete_produces()
            end = min(len(leader_log), action.fetch_offset + max_records)
            records_end = end if end > action.fetch_offset else None
            return FetchAnswered(
                action.current_leader_epoch, ErrorCode.NONE, self.leader.high_watermark, records_end
            )
        elif isinstance(action, SendListOffsets):
            return LeaderOffsetsAnswered(action.current_leader_epoch, 0, len(leader_log))
        else:
            assert isinstance(action, RemovePartition)
        return None

    @rule(seconds=st.floats(0, 2 * LAG_MS / 1000))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: self.leader is not None)
    @rule()
    def isr_check(self) -> None:
        assert self.leader is not None
        self._record_isr_change(self.leader.maybe_shrink_isr(self.now))

    @precondition(lambda self: self.proposal is not None)
    @rule()
    def record_isr_change(self) -> None:
        assert self.proposal is not None and self.leader is not None
        new = self.proposal.leader_and_isr
        if new.zk_version == self.state.zk_version:  # the conditional write
            self.state = LeaderAndIsr(new.leader, new.leader_epoch, new.isr, new.zk_version + 1)
            self.leader.isr_change_committed(self.state)
            self._complete_produces()
        else:
            self.leader.isr_change_failed()
        self.proposal = None

    @rule(broker_id=st.sampled_from(REPLICAS))
    def kill(self, broker_id: int) -> None:
        """kill -9: the session ends; the log on disk stays (flushed, in this model)."""
        if broker_id not in self.live:
            return
        self.live.discard(broker_id)
        self.fetchers.pop(broker_id, None)
        if self.leader is not None and self.leader.local_broker_id == broker_id:
            self.leader = None
            self.pending.clear()
            self.proposal = None
        self._controller()

    @rule(broker_id=st.sampled_from(REPLICAS))
    def restart(self, broker_id: int) -> None:
        if broker_id in self.live:
            return
        self.live.add(broker_id)
        before = self.state
        self._controller()
        if self.state == before and self.leader is not None:
            self._follow(broker_id)  # the controller tells it the current state

    # -- what must hold --
    @invariant()
    def no_acknowledged_record_is_lost(self) -> None:
        if self.leader is None:
            return
        leader_log = self.replicas[self.leader.local_broker_id].log
        for offset, record in self.acknowledged.items():
            assert offset < len(leader_log) and leader_log[offset] == record

    @invariant()
    def the_isr_agrees_with_the_leader_up_to_the_high_watermark(self) -> None:
        if self.leader is None:
            return
        high_watermark = self.leader.high_watermark
        leader_log = self.replicas[self.leader.local_broker_id].log
        for broker_id in self.leader.isr:
            assert self.replicas[broker_id].log[:high_watermark] == leader_log[:high_watermark]

    @invariant()
    def only_isr_members_lead(self) -> None:
        assert self.state.leader == -1 or self.state.leader in self.state.isr


def test_a_returning_leader_drops_the_records_only_it_had() -> None:
    model = ReplicationModel()
    model.start(min_isr=1)
    model.produce(2)
    for follower in (2, 3):
        model.follower_round(follower)  # both have the first two records
        model.follower_round(follower)  # and know the high watermark
    model.produce(3)  # only on broker 1: not acknowledged
    assert sorted(model.acknowledged) == [0, 1]
    model.kill(1)
    assert model.state.leader == 2
    model.produce(1)  # epoch 1's record at offset 2, on broker 2
    model.restart(1)
    for _ in range(4):
        model.follower_round(1)
        model.follower_round(3)
        if model.proposal is not None:
            model.record_isr_change()
    assert [record[0] for record in model.replicas[1].log] == [0, 0, 1]
    assert model.replicas[1].log == model.replicas[2].log
    model.no_acknowledged_record_is_lost()
    model.the_isr_agrees_with_the_leader_up_to_the_high_watermark()
    assert 1 in model.state.isr  # caught up, it rejoined


ReplicationModel.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None
)
test_replication_model = ReplicationModel.TestCase
