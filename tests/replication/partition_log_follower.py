"""A FollowerLog over the broker's own PartitionLog, through its public methods only.

Appending at the log end keeps the leader's offsets, since the follower's log end is
where the leader's next batch starts; the log stamps its own `leader_epoch` on each
batch, which for the single-host broker is the leader's too (checked, not assumed).
The broker's log cannot cut its tail yet (docs/replication.md, the wiring step), so a
truncation below the log end is refused: this serves followers whose log is a prefix
of the leader's.
"""

from __future__ import annotations

from broker.log.partition_log import PartitionLog
from broker.protocol.records import iter_batches
from broker.replication.fetched_records import FetchedBatches
from broker.replication.leader_epoch_cache import LeaderEpochCache


class TruncationUnsupported(NotImplementedError):
    pass


class PartitionLogFollower:
    def __init__(self, log: PartitionLog) -> None:
        self._log = log
        self._epoch_cache = LeaderEpochCache()
        self._high_watermark = 0

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    async def append_as_follower(self, batches: FetchedBatches) -> None:
        for header, data in iter_batches(batches.records):
            assert header.base_offset == self._log.log_end_offset, "appends continue the log"
            assert header.partition_leader_epoch == self._log.leader_epoch
            result = await self._log.append(data, header)
            assert (result.base_offset, result.last_offset) == (
                header.base_offset,
                header.last_offset,
            )
        for start in batches.epoch_starts:
            self._epoch_cache.assign(start.epoch, start.start_offset)

    async def truncate_to(self, offset: int) -> None:
        if offset < self._log.log_end_offset:
            raise TruncationUnsupported(f"the broker's log cannot truncate to {offset} yet")

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        raise TruncationUnsupported(f"the broker's log cannot restart at {offset} yet")

    def update_high_watermark(self, high_watermark: int) -> None:
        self._high_watermark = high_watermark
