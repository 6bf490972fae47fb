"""Follower truncation (KIP-101/KIP-279): a follower never keeps a record the leader
does not have, and keeps every record both logs share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.replication.fetch_divergence import diverging_epoch
from broker.replication.follower_truncation import (
    OffsetTruncationState,
    offset_truncation_state,
)
from broker.replication.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_END_OFFSET,
    EpochEndOffset,
    LeaderEpochCache,
)


def epochs_of(log: list[int]) -> LeaderEpochCache:
    """The cache a replica builds from the epoch of each record of its log."""
    cache = LeaderEpochCache()
    for offset, epoch in enumerate(log):
        cache.assign(epoch, offset)
    return cache


def test_a_follower_with_the_leaders_epoch_truncates_to_the_smaller_end() -> None:
    follower = epochs_of([0, 0, 1, 1, 1])
    answer = EpochEndOffset(1, 4)  # the leader's epoch 1 ended at 4
    state = offset_truncation_state(answer, follower, 5, follower_high_watermark=2)
    assert state == OffsetTruncationState(4, truncation_completed=True)


def test_a_diverging_follower_truncates_in_rounds_down_to_a_shared_epoch() -> None:
    # The leader led epochs 1 and 3; the follower led epoch 2 alone, which the leader
    # never had. Asked for epoch 2, the leader answers epoch 1, ending at 4.
    follower = epochs_of([0, 0, 2, 2, 2])
    first = offset_truncation_state(EpochEndOffset(1, 4), follower, 5, 1)
    # The follower has no epoch 1: it cuts where its epoch 0 ended and asks again.
    assert first == OffsetTruncationState(2, truncation_completed=False)
    follower.truncate_from_end(first.offset)
    second = offset_truncation_state(EpochEndOffset(0, 2), follower, 2, 1)
    assert second == OffsetTruncationState(2, truncation_completed=True)


def test_without_the_leaders_epochs_only_the_high_watermark_or_its_end_is_trusted() -> None:
    follower = epochs_of([0, 0, 0])
    assert offset_truncation_state(UNDEFINED_EPOCH_END_OFFSET, follower, 3, 1) == (
        OffsetTruncationState(1, True)
    )
    assert offset_truncation_state(EpochEndOffset(UNDEFINED_EPOCH, 2), follower, 3, 1) == (
        OffsetTruncationState(2, True)
    )


@st.composite
def diverged_logs(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    """A leader's and a follower's logs as the epoch of each record: a shared prefix,
    then each its own records. At most one side continues the prefix's last epoch (a
    leader's epoch writes each offset once), and the sides' later epochs differ,
    since each epoch has one leader."""
    prefix = sorted(draw(st.lists(st.integers(0, 6), max_size=8)))
    last = prefix[-1] if prefix else -1
    own_epochs = draw(st.lists(st.integers(last + 1, last + 8), unique=True, max_size=6))
    split = draw(st.integers(0, len(own_epochs)))
    leader_own, follower_own = own_epochs[:split], own_epochs[split:]

    def suffix(own: list[int], continues: bool) -> list[int]:
        records = [last] * draw(st.integers(0, 3)) if continues and prefix else []
        for epoch in sorted(own):
            records += [epoch] * draw(st.integers(1, 3))
        return records

    leader_continues = draw(st.booleans())
    leader = prefix + suffix(leader_own, leader_continues)
    follower = prefix + suffix(follower_own, not leader_continues)
    high_watermark = draw(st.integers(0, len(prefix)))
    return leader, follower, high_watermark


@given(diverged_logs())
def test_rounds_of_truncation_end_exactly_where_the_logs_diverge(
    logs: tuple[list[int], list[int], int],
) -> None:
    leader_log, follower_log, high_watermark = logs
    shared = 0
    while (
        shared < min(len(leader_log), len(follower_log))
        and leader_log[shared] == follower_log[shared]
    ):
        shared += 1
    leader_cache = epochs_of(leader_log)
    # The leader records its own new epoch at its log end as it takes over.
    current = max(leader_log + follower_log, default=-1) + 1
    leader_cache.assign(current, len(leader_log))
    follower_cache = epochs_of(follower_log)
    log_end = len(follower_log)
    for _ in range(len(follower_cache.entries) + 1):
        latest = follower_cache.latest_epoch
        if latest is None:
            decision = OffsetTruncationState(min(high_watermark, log_end), True)
        else:
            answer = leader_cache.end_offset_for(latest, len(leader_log))
            decision = offset_truncation_state(answer, follower_cache, log_end, high_watermark)
        assert decision.offset <= log_end
        log_end = decision.offset
        follower_cache.truncate_from_end(log_end)
        if decision.truncation_completed:
            break
    else:
        raise AssertionError("truncation did not finish within one round per epoch")
    assert log_end <= shared  # no offset beyond the common epoch's end is kept
    assert log_end >= high_watermark  # nothing committed is thrown away
    assert log_end == shared  # and nothing shared is thrown away
    assert follower_cache.entries == epochs_of(follower_log[:log_end]).entries


@given(diverged_logs())
def test_a_fetch_is_served_exactly_when_the_followers_log_is_a_prefix_of_the_leaders(
    logs: tuple[list[int], list[int], int],
) -> None:
    leader_log, follower_log, high_watermark = logs
    leader_epochs = epochs_of(leader_log)
    leader_epochs.assign(max(leader_log + follower_log, default=-1) + 1, len(leader_log))
    last_epoch = follower_log[-1] if follower_log else -1
    divergence = diverging_epoch(leader_epochs, len(leader_log), len(follower_log), last_epoch)
    is_prefix = follower_log == leader_log[: len(follower_log)]
    assert (divergence is None) == is_prefix
    if divergence is not None:
        # The answer truncates as OffsetsForLeaderEpoch's would have.
        follower_epochs = epochs_of(follower_log)
        via_fetch = offset_truncation_state(
            divergence, follower_epochs, len(follower_log), high_watermark
        )
        answer = leader_epochs.end_offset_for(last_epoch, len(leader_log))
        assert via_fetch == offset_truncation_state(
            answer, follower_epochs, len(follower_log), high_watermark
        )
