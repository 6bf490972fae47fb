"""The leader's check of a follower's Fetch against its own epochs (KIP-595's
DivergingEpoch, Fetch v12+).

A follower names the epoch of the last record it holds. If the leader's log has that
epoch ending at or after the fetch offset, the follower's log is a prefix of the
leader's and the fetch is served. Otherwise the logs diverged: the leader answers with
where that epoch (or the largest one below it) ends in its log, and the follower
truncates as it would after OffsetsForLeaderEpoch, saving a round trip.
"""

from __future__ import annotations

from broker.replication.leader_epoch_cache import EpochEndOffset, LeaderEpochCache

NO_LAST_FETCHED_EPOCH = -1


def diverging_epoch(
    leader_epochs: LeaderEpochCache,
    leader_log_end_offset: int,
    fetch_offset: int,
    last_fetched_epoch: int,
) -> EpochEndOffset | None:
    """None when the fetch may be served; the epoch end to truncate to otherwise."""
    if last_fetched_epoch == NO_LAST_FETCHED_EPOCH:
        return None
    end = leader_epochs.end_offset_for(last_fetched_epoch, leader_log_end_offset)
    if end.leader_epoch < last_fetched_epoch or end.end_offset < fetch_offset:
        return end
    return None
