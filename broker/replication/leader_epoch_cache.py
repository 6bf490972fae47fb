"""Leader epochs and the offsets where they start (Kafka's LeaderEpochFileCache, KIP-101).

A leader appends each batch stamped with its epoch, and the first offset of each
new epoch is recorded here. That lets any replica answer "where did epoch E end
in your log?" (OffsetsForLeaderEpoch), which is what a follower needs to find
the last offset its log shares with the leader's: offsets are not enough, since
two leaders may have written different records at the same offsets.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@attrs.frozen(order=True)
class EpochEntry:
    epoch: int
    start_offset: int


@attrs.frozen
class EpochEndOffset:
    """OffsetsForLeaderEpoch's answer: the largest epoch at most the requested one
    and the offset where it ended (the next epoch's start, or the log end)."""

    leader_epoch: int
    end_offset: int


UNDEFINED_EPOCH_END_OFFSET = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class LeaderEpochCache:
    """The entries kept strictly increasing in both epoch and start offset."""

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = []
        for entry in entries:
            self.assign(entry.epoch, entry.start_offset)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed (and
        must be written out). An entry that would break monotonicity replaces the
        entries it contradicts, as Kafka's does: the newest knowledge wins."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch {epoch} at offset {start_offset}")
        if self._entries:
            latest = self._entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
        self._entries = [
            e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
        ]
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH_END_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return EpochEndOffset(requested_epoch, log_end_offset)
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:  # newer than anything this replica knows
            return UNDEFINED_EPOCH_END_OFFSET
        floor = next((e for e in reversed(self._entries) if e.epoch <= requested_epoch), None)
        if floor is None:  # older than anything kept: it ended where the oldest kept began
            return EpochEndOffset(requested_epoch, higher.start_offset)
        return EpochEndOffset(floor.epoch, higher.start_offset)

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was truncated to `end_offset`: epochs starting there or later are gone."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        changed = len(kept) != len(self._entries)
        self._entries = kept
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start moved to `start_offset`: the epoch holding it now starts there."""
        if not self._entries or self._entries[0].start_offset >= start_offset:
            return False
        covering = [e for e in self._entries if e.start_offset <= start_offset]
        later = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(covering[-1].epoch, start_offset), *later]
        return True
