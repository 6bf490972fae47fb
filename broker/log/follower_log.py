"""The broker's own PartitionLog as a replica fetcher's FollowerLog
(broker/replication/follower_log.py): Kafka's UnifiedLog seen from the
ReplicaFetcherThread. The log does the work (append keeping the leader's offsets and
epochs, truncation, the epoch cache and its checkpoint, the high watermark); this
class only speaks the fetcher's protocol, so the replication package never imports
the log.
"""

from __future__ import annotations

from broker.log.partition_log import PartitionLog
from broker.replication.fetched_records import FetchedBatches
from broker.replication.leader_epoch_cache import LeaderEpochCache


class PartitionFollowerLog:
    """A follower replica's log (implements `broker.replication.follower_log.FollowerLog`)."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self.log.epoch_cache

    async def append_as_follower(self, batches: FetchedBatches) -> None:
        await self.log.append_as_follower(batches.records)

    async def truncate_to(self, offset: int) -> None:
        await self.log.truncate_to(offset)

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        await self.log.truncate_fully_and_start_at(offset)

    def update_high_watermark(self, high_watermark: int) -> None:
        self.log.update_high_watermark(high_watermark)
