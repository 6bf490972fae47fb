"""Where a follower truncates its log before fetching (KIP-101, KIP-279).

The follower asks the leader where the follower's latest epoch ended in the
leader's log (OffsetsForLeaderEpoch). If the leader answers with that very epoch,
the logs agree up to the smaller of the two ends of that epoch. If the leader
answers with an older epoch, the follower's latest epoch never happened on the
leader: the logs diverged earlier. The follower then truncates to where *its*
log has the leader's epoch end, and asks again with its next older epoch, until
both name the same epoch (KIP-279's rounds), so it never keeps an offset beyond
the end of the last epoch the two logs share. A leader answering in a Fetch
response with a diverging epoch (KIP-595's DivergingEpoch) is handled the same.
"""

from __future__ import annotations

import attrs

from broker.replication.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    LeaderEpochCache,
)


@attrs.frozen
class OffsetTruncationState:
    """Truncate to `offset`; if not `truncation_completed`, ask the leader again with
    the follower's new latest epoch before fetching."""

    offset: int
    truncation_completed: bool


def offset_truncation_state(
    leader_answer: EpochEndOffset,
    follower_cache: LeaderEpochCache,
    follower_log_end_offset: int,
    follower_high_watermark: int,
) -> OffsetTruncationState:
    if leader_answer.end_offset == UNDEFINED_EPOCH_OFFSET:
        # The leader knows no epoch at or below ours: only the high watermark is safe.
        return OffsetTruncationState(
            min(follower_high_watermark, follower_log_end_offset), truncation_completed=True
        )
    if leader_answer.leader_epoch == UNDEFINED_EPOCH:
        # A leader without epochs: its log end is all it can say.
        return OffsetTruncationState(
            min(leader_answer.end_offset, follower_log_end_offset), truncation_completed=True
        )
    ours = follower_cache.end_offset_for(leader_answer.leader_epoch, follower_log_end_offset)
    if ours.end_offset == UNDEFINED_EPOCH_OFFSET:
        # This replica tracked no epoch that old (a new or upgraded replica): trust the leader.
        return OffsetTruncationState(
            min(leader_answer.end_offset, follower_log_end_offset), truncation_completed=True
        )
    if ours.leader_epoch != leader_answer.leader_epoch:
        # We never had the leader's epoch: cut at our end of the epoch below it and ask again.
        return OffsetTruncationState(
            min(ours.end_offset, follower_log_end_offset), truncation_completed=False
        )
    return OffsetTruncationState(
        min(ours.end_offset, leader_answer.end_offset, follower_log_end_offset),
        truncation_completed=True,
    )
