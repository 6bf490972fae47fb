"""The follower's fetch state machine: what it sends, and what it does with each answer."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.error_codes import ErrorCode
from broker.replication.fetcher_partition_state import (
    AppendAsFollower,
    EpochEndOffsetAnswered,
    Event,
    FetchAnswered,
    FetcherSettings,
    FetchPhase,
    LeaderOffsetsAnswered,
    LocalLog,
    PartitionFetchState,
    Poll,
    RemovePartition,
    SendFetch,
    SendListOffsets,
    SendOffsetsForLeaderEpoch,
    Transition,
    Truncate,
    TruncateFullyAndStartAt,
    UpdateHighWatermark,
    on_event,
)
from broker.replication.leader_epoch_cache import EpochEndOffset, EpochEntry, LeaderEpochCache

EPOCH = 7
BACKOFF = FetcherSettings(replica_fetch_backoff_ms=500)


def local_log(log_end: int = 10, high_watermark: int = 4, start: int = 0) -> LocalLog:
    epochs = LeaderEpochCache([EpochEntry(3, 0), EpochEntry(5, 6)])
    return LocalLog(start, log_end, high_watermark, epochs)


def fetching(offset: int = 10) -> PartitionFetchState:
    return PartitionFetchState(2, EPOCH, offset, FetchPhase.FETCHING)


def step(state: PartitionFetchState, event: Event, log: LocalLog | None = None) -> Transition:
    return on_event(state, event, log or local_log(), now=100.0, settings=BACKOFF)


def test_a_new_leadership_asks_for_the_end_of_the_followers_latest_epoch_first() -> None:
    state = PartitionFetchState.start_following(leader_id=2, leader_epoch=EPOCH, log_end_offset=10)
    assert state.phase is FetchPhase.TRUNCATING
    assert step(state, Poll()).actions == (SendOffsetsForLeaderEpoch(EPOCH, 5),)


def test_the_leaders_answer_truncates_then_fetching_starts_there() -> None:
    state = PartitionFetchState.start_following(2, EPOCH, 10)
    answered = step(state, EpochEndOffsetAnswered(EPOCH, ErrorCode.NONE, EpochEndOffset(5, 8)))
    assert answered.actions == (Truncate(8),)
    assert answered.state == PartitionFetchState(2, EPOCH, 8, FetchPhase.FETCHING)
    polled = step(answered.state, Poll(), local_log(log_end=8))
    assert polled.actions == (SendFetch(8, EPOCH, last_fetched_epoch=5, log_start_offset=0),)


def test_a_follower_without_epochs_truncates_to_its_high_watermark() -> None:
    log = LocalLog(0, 10, 4, LeaderEpochCache())
    polled = step(PartitionFetchState.start_following(2, EPOCH, 10), Poll(), log)
    assert polled.actions == (Truncate(4), SendFetch(4, EPOCH, -1, 0))
    assert polled.state is not None and polled.state.phase is FetchPhase.FETCHING


def test_fetched_records_are_appended_and_the_high_watermark_follows_the_leaders() -> None:
    answered = step(fetching(), FetchAnswered(EPOCH, ErrorCode.NONE, 30, records_end_offset=14))
    assert answered.actions == (AppendAsFollower(14), UpdateHighWatermark(14))
    assert answered.state == fetching(14)
    empty = step(fetching(), FetchAnswered(EPOCH, ErrorCode.NONE, 9))
    assert empty.actions == (UpdateHighWatermark(9),)


def test_a_diverging_epoch_in_the_fetch_answer_truncates_without_another_request() -> None:
    diverging = FetchAnswered(EPOCH, ErrorCode.NONE, 9, diverging_epoch=EpochEndOffset(5, 8))
    answered = step(fetching(), diverging)
    assert answered.actions == (Truncate(8),)
    assert answered.state == fetching(8)


def test_offset_out_of_range_asks_the_leader_for_its_offsets() -> None:
    answered = step(fetching(), FetchAnswered(EPOCH, ErrorCode.OFFSET_OUT_OF_RANGE))
    assert answered.actions == (SendListOffsets(EPOCH),)
    assert answered.state is not None and answered.state.phase is FetchPhase.OUT_OF_RANGE
    assert step(answered.state, Poll()).actions == ()  # no fetch until the offsets come


@pytest.mark.parametrize(
    ("leader_start", "leader_end", "actions", "offset"),
    [
        (0, 8, (Truncate(8),), 8),  # the leader's log is shorter: follow it
        (15, 40, (TruncateFullyAndStartAt(15),), 15),  # the leader deleted what comes next
        (5, 40, (), 10),  # back in range
    ],
)
def test_the_leaders_offsets_resolve_out_of_range(
    leader_start: int, leader_end: int, actions: tuple[object, ...], offset: int
) -> None:
    waiting = attrs.evolve(fetching(), phase=FetchPhase.OUT_OF_RANGE)
    answered = step(waiting, LeaderOffsetsAnswered(EPOCH, leader_start, leader_end))
    assert answered.actions == actions
    assert answered.state == fetching(offset)


def test_a_fenced_epoch_stops_fetching_until_the_controller_says_more() -> None:
    for event in (
        FetchAnswered(EPOCH, ErrorCode.FENCED_LEADER_EPOCH),
        EpochEndOffsetAnswered(EPOCH, ErrorCode.FENCED_LEADER_EPOCH, EpochEndOffset(-1, -1)),
    ):
        state = (
            fetching()
            if isinstance(event, FetchAnswered)
            else attrs.evolve(fetching(), phase=FetchPhase.TRUNCATING)
        )
        answered = step(state, event)
        assert answered == Transition(None, (RemovePartition(ErrorCode.FENCED_LEADER_EPOCH),))


@pytest.mark.parametrize(
    "error", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR]
)
def test_retriable_errors_delay_the_partition_by_the_backoff(error: ErrorCode) -> None:
    delayed = step(fetching(), FetchAnswered(EPOCH, error))
    assert delayed.actions == ()
    assert delayed.state is not None and delayed.state.delayed_until == 100.5
    assert on_event(delayed.state, Poll(), local_log(), now=100.4).actions == ()
    assert on_event(delayed.state, Poll(), local_log(), now=100.5).actions == (
        SendFetch(10, EPOCH, 5, 0),
    )


@pytest.mark.parametrize(
    "error", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH]
)
def test_a_leader_not_aware_of_its_election_yet_is_asked_again_soon_then_less_often(
    error: ErrorCode,
) -> None:
    state = fetching()
    delays = []
    for _ in range(7):
        delayed = step(state, FetchAnswered(EPOCH, error))
        assert delayed.actions == () and delayed.state is not None
        assert delayed.state.delayed_until is not None
        delays.append(round(delayed.state.delayed_until - 100, 3))
        state = delayed.state
    # 25 ms first, doubling, never beyond replica.fetch.backoff.ms (500 here).
    assert delays == [0.025, 0.05, 0.1, 0.2, 0.4, 0.5, 0.5]
    # An answer without error starts the count again.
    ready = on_event(state, Poll(), local_log(), now=101).state
    assert ready is not None
    answered = on_event(ready, FetchAnswered(EPOCH, ErrorCode.NONE, 10), local_log(), 101)
    assert answered.state is not None and answered.state.leader_not_ready == 0


ERRORS = st.sampled_from(list(ErrorCode)[:80])
answers = st.one_of(
    st.builds(Poll),
    st.builds(
        EpochEndOffsetAnswered,
        st.sampled_from([EPOCH - 1, EPOCH]),
        ERRORS,
        st.builds(EpochEndOffset, st.integers(-1, 9), st.integers(-1, 30)),
    ),
    st.builds(
        FetchAnswered,
        st.sampled_from([EPOCH - 1, EPOCH]),
        ERRORS,
        st.integers(-1, 40),
        st.none() | st.integers(0, 40),
        st.none() | st.builds(EpochEndOffset, st.integers(0, 9), st.integers(0, 30)),
    ),
    st.builds(
        LeaderOffsetsAnswered,
        st.sampled_from([EPOCH - 1, EPOCH]),
        st.integers(0, 40),
        st.integers(0, 40),
    ),
)


@given(
    st.sampled_from(list(FetchPhase)),
    st.integers(0, 12),
    st.lists(st.tuples(answers, st.floats(0, 2)), max_size=20),
)
def test_every_event_in_every_phase_keeps_the_follower_safe(
    phase: FetchPhase, log_end: int, events: list[tuple[Event, float]]
) -> None:
    state: PartitionFetchState | None = PartitionFetchState(2, EPOCH, log_end, phase)
    log = LocalLog(0, log_end, min(log_end, 4), LeaderEpochCache([EpochEntry(3, 0)]))
    now = 0.0
    for event, seconds in events:
        if state is None:
            break
        now += seconds
        transition = on_event(state, event, log, now, BACKOFF)
        stale = not isinstance(event, Poll) and event.request_leader_epoch != EPOCH
        if stale:  # an answer from an earlier leadership changes nothing
            assert transition == Transition(state)
        for action in transition.actions:
            if isinstance(action, Truncate):
                assert action.offset <= log.log_end_offset  # truncation never extends
            if isinstance(action, SendFetch | SendOffsetsForLeaderEpoch | SendListOffsets):
                assert action.current_leader_epoch == EPOCH
            if isinstance(action, SendFetch):
                assert transition.state is not None
                assert action.fetch_offset == transition.state.fetch_offset
            if isinstance(action, UpdateHighWatermark):
                assert transition.state is not None
                assert action.high_watermark <= transition.state.fetch_offset
        if isinstance(event, Poll) and state.is_delayed(now):
            assert transition == Transition(state)  # a delayed partition sends nothing
        if transition.state is None:
            assert transition.actions == (RemovePartition(ErrorCode.FENCED_LEADER_EPOCH),)
        else:
            assert transition.state.current_leader_epoch == EPOCH
            log = LocalLog(
                0,
                transition.state.fetch_offset,
                min(log.high_watermark, transition.state.fetch_offset),
                log.epoch_cache,
            )
        state = transition.state
