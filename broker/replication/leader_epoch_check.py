"""The current-leader-epoch check of Fetch, ListOffsets and OffsetsForLeaderEpoch (KIP-320).

A request names the leader epoch its sender believes current. Older means the
sender follows a deposed leader (FENCED_LEADER_EPOCH: refresh metadata); newer
means this broker has not yet heard of the election (UNKNOWN_LEADER_EPOCH:
retry). -1 is a sender that does not track epochs and is always served.
"""

from __future__ import annotations

from broker.protocol.error_codes import ErrorCode

NO_EPOCH_CHECK = -1


def check_current_leader_epoch(requested_epoch: int, local_epoch: int) -> ErrorCode:
    if requested_epoch in (NO_EPOCH_CHECK, local_epoch):
        return ErrorCode.NONE
    if requested_epoch < local_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH
