"""The leader's view of its followers: ISR, high watermark, acks=all, min.insync.replicas."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker.protocol.error_codes import ErrorCode
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.partition_leader_state import (
    ACKS_ALL,
    IsrChangeProposal,
    LeaderSettings,
    PartitionLeaderState,
)
from broker.replication.topic_partition import TopicPartition

TP = TopicPartition("orders", 0)
LAG_MS = 10_000
LAG_S = LAG_MS / 1000


def leader(
    isr: tuple[int, ...] = (1, 2, 3),
    *,
    log_end_offset: int = 10,
    high_watermark: int = 10,
    min_insync_replicas: int = 2,
    now: float = 0.0,
) -> PartitionLeaderState:
    return PartitionLeaderState(
        TP,
        1,
        (1, 2, 3),
        LeaderAndIsr(1, 5, isr, zk_version=7),
        log_end_offset=log_end_offset,
        high_watermark=high_watermark,
        now=now,
        settings=LeaderSettings(LAG_MS, min_insync_replicas),
    )


def commit(state: PartitionLeaderState, proposal: IsrChangeProposal | None) -> None:
    assert proposal is not None
    new = proposal.leader_and_isr
    state.isr_change_committed(
        LeaderAndIsr(new.leader, new.leader_epoch, new.isr, new.zk_version + 1)
    )


def test_the_high_watermark_is_the_smallest_log_end_in_the_isr() -> None:
    state = leader()
    state.on_append(20)
    assert state.on_follower_fetch(2, 20, now=1).high_watermark_advanced is False
    assert state.high_watermark == 10
    outcome = state.on_follower_fetch(3, 15, now=1)
    assert (outcome.error, outcome.high_watermark_advanced) == (ErrorCode.NONE, True)
    assert state.high_watermark == 15


def test_acks_all_completes_once_every_isr_member_has_the_records() -> None:
    state = leader()
    state.on_append(12)
    assert state.acks_all_status(12).done is False
    state.on_follower_fetch(2, 12, now=1)
    assert state.acks_all_status(12).done is False
    state.on_follower_fetch(3, 12, now=1)
    assert state.acks_all_status(12).done is True
    assert state.acks_all_status(12).error is ErrorCode.NONE


def test_below_min_insync_replicas_acks_all_is_refused_before_the_append() -> None:
    state = leader(isr=(1,), min_insync_replicas=2)
    assert state.check_produce(ACKS_ALL) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert state.check_produce(1) is ErrorCode.NONE
    assert leader(min_insync_replicas=2).check_produce(ACKS_ALL) is ErrorCode.NONE


def test_an_isr_shrinking_below_min_insync_after_the_append_answers_after_append() -> None:
    state = leader(min_insync_replicas=3)
    state.on_append(11)
    state.on_follower_fetch(2, 11, now=1)
    commit(state, state.maybe_shrink_isr(now=LAG_S + 0.5))  # 3 never fetched
    assert state.isr == (1, 2)
    status = state.acks_all_status(11)
    assert (status.done, status.error) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_a_follower_lagging_past_replica_lag_time_max_leaves_the_isr_with_the_zk_version() -> None:
    state = leader()
    state.on_append(11)
    state.on_follower_fetch(2, 11, now=LAG_S)
    assert state.maybe_shrink_isr(now=LAG_S) is None  # within the lag: nobody leaves
    proposal = state.maybe_shrink_isr(now=LAG_S + 1)
    assert proposal == IsrChangeProposal(TP, LeaderAndIsr(1, 5, (1, 2), zk_version=7))
    assert state.maybe_shrink_isr(now=LAG_S + 2) is None  # one change in flight at a time
    assert state.isr_change_committed(LeaderAndIsr(1, 5, (1, 2), zk_version=8)) is True
    assert state.high_watermark == 11  # 3 no longer holds it back


def test_a_follower_that_keeps_fetching_everything_stays_in_sync_under_load() -> None:
    state = leader()
    for second in range(1, 40):
        end = state.log_end_offset
        state.on_follower_fetch(2, end, now=second)
        state.on_follower_fetch(3, end, now=second)
        state.on_append(end + 5)  # records arrive between every pair of fetches
    assert state.out_of_sync_replicas(now=40) == ()


def test_a_follower_reaching_the_high_watermark_rejoins_the_isr() -> None:
    state = leader(isr=(1, 2), now=0)
    state.on_append(30)
    assert state.on_follower_fetch(3, 9, now=1).isr_change is None  # below the HW (10)
    outcome = state.on_follower_fetch(3, 10, now=2)
    assert outcome.isr_change == IsrChangeProposal(TP, LeaderAndIsr(1, 5, (1, 2, 3), 7))
    # Pending: the high watermark already waits for the joining replica.
    state.on_follower_fetch(2, 30, now=3)
    assert state.high_watermark == 10
    state.isr_change_failed()
    assert state.maximal_isr == {1, 2}


def test_a_replica_must_reach_the_leaders_epoch_start_to_join() -> None:
    state = leader(isr=(1, 2), log_end_offset=20, high_watermark=10)
    assert state.on_follower_fetch(3, 15, now=1).isr_change is None
    assert state.on_follower_fetch(3, 20, now=1).isr_change is not None


def test_fetches_from_strangers_or_beyond_the_log_end_are_refused() -> None:
    state = leader()
    assert state.on_follower_fetch(9, 0, now=1).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert state.on_follower_fetch(2, 11, now=1).error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert state.on_follower_fetch(2, -1, now=1).error is ErrorCode.OFFSET_OUT_OF_RANGE


def test_an_isr_member_outside_the_replicas_holds_the_high_watermark_until_it_lags_out() -> None:
    """A reassignment's assignment written before its ISR change (replicas (1, 3), ISR
    (1, 2)): the leader starts, acks=all still waits for broker 2, and broker 2 leaves
    the ISR by lagging and never joins again."""
    state = PartitionLeaderState(
        TP,
        1,
        (1, 3),
        LeaderAndIsr(1, 5, (1, 2), zk_version=7),
        log_end_offset=10,
        high_watermark=10,
        now=0.0,
        settings=LeaderSettings(LAG_MS, 1),
    )
    state.on_append(20)
    assert state.acks_all_status(20).done is False
    assert state.on_follower_fetch(3, 20, now=1).isr_change is not None
    state.isr_change_failed()
    assert state.on_follower_fetch(2, 20, now=1).high_watermark_advanced is True
    assert state.acks_all_status(20).done is True
    state.on_append(30)
    commit(state, state.maybe_shrink_isr(now=1 + LAG_S + 1))
    assert state.isr == (1,)
    assert state.on_follower_fetch(2, 30, now=20).isr_change is None


class LeaderMachine(RuleBasedStateMachine):
    """Every interleaving of appends, follower fetches (each follower's log only grows,
    as within one leadership), time, ISR checks and the store's answers."""

    @initialize(
        isr_followers=st.sets(st.sampled_from([2, 3, 4])),
        start=st.integers(0, 5),
        min_isr=st.integers(1, 4),
    )
    def start(self, isr_followers: set[int], start: int, min_isr: int) -> None:
        self.now = 0.0
        isr = (1, *sorted(isr_followers))
        self.state = PartitionLeaderState(
            TP,
            1,
            (1, 2, 3, 4),
            LeaderAndIsr(1, 3, isr, 0),
            log_end_offset=start,
            high_watermark=start,
            now=self.now,
            settings=LeaderSettings(LAG_MS, min_isr),
        )
        self.initial_high_watermark = self.state.high_watermark
        self.highest_seen = self.state.high_watermark
        self.proposal: IsrChangeProposal | None = None
        self.completed: dict[int, bool] = {}

    @rule(records=st.integers(1, 5))
    def append(self, records: int) -> None:
        if self.state.check_produce(ACKS_ALL) is ErrorCode.NONE:
            self.state.on_append(self.state.log_end_offset + records)
            self.completed[self.state.log_end_offset] = False

    @rule(follower=st.sampled_from([2, 3, 4]), progress=st.none() | st.integers(0, 6))
    def fetch(self, follower: int, progress: int | None) -> None:
        """`progress` None: the follower catches up with the leader's whole log."""
        known = max(0, self.state.followers[follower].log_end_offset)
        offset = self.state.log_end_offset if progress is None else known + progress
        offset = min(self.state.log_end_offset, offset)
        outcome = self.state.on_follower_fetch(follower, offset, self.now)
        assert outcome.error is ErrorCode.NONE
        if outcome.isr_change is not None:
            assert self.proposal is None
            self.proposal = outcome.isr_change

    @rule(seconds=st.floats(0, 2 * LAG_S))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def isr_check(self) -> None:
        proposal = self.state.maybe_shrink_isr(self.now)
        if proposal is not None:
            assert self.proposal is None
            self.proposal = proposal

    @precondition(lambda self: self.proposal is not None)
    @rule(won=st.booleans())
    def store_answers(self, won: bool) -> None:
        assert self.proposal is not None
        assert self.proposal.leader_and_isr.zk_version == self.state.leader_and_isr.zk_version
        if won:
            commit(self.state, self.proposal)
        else:
            self.state.isr_change_failed()
        self.proposal = None

    @invariant()
    def high_watermark_never_decreases(self) -> None:
        assert self.state.high_watermark >= self.highest_seen
        self.highest_seen = self.state.high_watermark

    @invariant()
    def high_watermark_never_exceeds_an_isr_members_log_end(self) -> None:
        if self.state.high_watermark == self.initial_high_watermark:
            return  # not moved yet: followers may not have reported their log ends
        for broker_id in self.state.maximal_isr:
            assert self.state.high_watermark <= self.state.log_end_of(broker_id)
        assert self.state.high_watermark <= self.state.log_end_offset

    @invariant()
    def the_leader_stays_in_the_isr(self) -> None:
        assert 1 in self.state.isr

    @invariant()
    def acks_all_completes_exactly_when_the_high_watermark_covers_it(self) -> None:
        for required in self.completed:
            status = self.state.acks_all_status(required)
            assert status.done == (self.state.high_watermark >= required)
            if self.completed[required]:
                assert status.done  # once answered, never taken back
            self.completed[required] = status.done
            if status.done:
                below = len(self.state.isr) < self.state.settings.min_insync_replicas
                expected = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if below else ErrorCode.NONE
                assert status.error is expected


LeaderMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_leader_state_machine = LeaderMachine.TestCase


def test_a_follower_holding_the_whole_log_stays_in_sync_however_long_ago_it_fetched() -> None:
    state = leader()
    state.on_follower_fetch(2, 10, now=1)
    state.on_follower_fetch(3, 10, now=1)
    assert state.maybe_shrink_isr(now=1000) is None
    state.on_append(11)
    assert state.out_of_sync_replicas(now=1000) == (2, 3)


def test_a_replica_being_removed_never_rejoins_the_isr() -> None:
    """A reassignment completing from (1, 2, 3) to (1, 3): the controller writes the ISR
    without 2 before the assignment without it, and 2 goes on fetching meanwhile; taken
    back in, it would stay in the ISR of a partition it is no longer a replica of."""
    state = PartitionLeaderState(
        TP,
        1,
        (1, 3, 2),
        LeaderAndIsr(1, 6, (1, 3), zk_version=9),
        log_end_offset=10,
        high_watermark=10,
        now=0.0,
        settings=LeaderSettings(LAG_MS, 1),
        removing=(2,),
    )
    assert state.on_follower_fetch(2, 10, now=1).isr_change is None
    state.assignment_changed((1, 3), (), now=2)
    assert state.on_follower_fetch(2, 10, now=3).isr_change is None


def test_a_cancelled_removal_lets_the_replica_rejoin_within_the_epoch() -> None:
    state = leader(isr=(1, 3))
    state.assignment_changed((1, 3, 2), (2,), now=1)
    assert state.on_follower_fetch(2, 10, now=2).isr_change is None
    state.assignment_changed((1, 2, 3), (), now=3)
    outcome = state.on_follower_fetch(2, 10, now=4)
    assert outcome.isr_change == IsrChangeProposal(TP, LeaderAndIsr(1, 5, (1, 3, 2), 7))


def test_a_replica_added_within_the_epoch_is_followed_and_joins_once_caught_up() -> None:
    state = leader()
    assert state.on_follower_fetch(4, 10, now=1).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    state.assignment_changed((1, 2, 3, 4), (), now=2)
    assert state.on_follower_fetch(4, 5, now=3).isr_change is None
    assert state.on_follower_fetch(4, 10, now=4).isr_change is not None


def test_a_former_replica_left_in_the_isr_leaves_once_it_stops_fetching() -> None:
    """Holding the whole log keeps a replica in sync however long ago it fetched; a
    broker that is no longer a replica stops fetching, and lags out by time alone."""
    state = leader()
    state.on_follower_fetch(2, 10, now=1)
    state.on_follower_fetch(3, 10, now=1)
    state.assignment_changed((1, 3), (), now=2)
    assert state.maybe_shrink_isr(now=1 + LAG_S) is None
    state.on_follower_fetch(3, 10, now=1 + LAG_S)
    proposal = state.maybe_shrink_isr(now=1 + LAG_S + 1)
    assert proposal == IsrChangeProposal(TP, LeaderAndIsr(1, 5, (1, 3), zk_version=7))
