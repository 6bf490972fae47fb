"""The broker's own PartitionLog as a replica fetcher's FollowerLog
(broker/replication/follower_log.py): Kafka's UnifiedLog seen from the
ReplicaFetcherThread. The log does the work (append keeping the leader's offsets and
epochs, truncation, the epoch cache and its checkpoint, the high watermark); this
class only speaks the fetcher's protocol, so the replication package never imports
the log.

It is also where a replica's corrupt batch is repaired from the leader
(docs/corrupt-data.md): the log end it reports stops at the first offset the log knows
lost (`PartitionLog.unreadable_from`), so the truncation every fetcher starts with
(KIP-101) cuts the log there, and the fetch that follows copies the leader's batches
from that offset on: the replica ends byte for byte equal to the leader.
"""

from __future__ import annotations

import logging

from broker.log.partition_log import PartitionLog
from broker.replication.fetched_records import FetchedBatches
from broker.replication.leader_epoch_cache import LeaderEpochCache

logger = logging.getLogger(__name__)


class PartitionFollowerLog:
    """A follower replica's log (implements `broker.replication.follower_log.FollowerLog`)."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The log end, or the first offset lost to a corrupt batch when one is known:
        what is readable here, and so where fetching resumes once truncated."""
        unreadable = self.log.unreadable_from
        end = self.log.log_end_offset
        return end if unreadable is None else min(unreadable, end)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self.log.epoch_cache

    async def append_as_follower(self, batches: FetchedBatches) -> None:
        # Checked once, by the fetcher (fetched_batches); a FetchedBatches made without
        # its checked headers is checked by the log.
        await self.log.append_as_follower(batches.records, checked=batches.checked or None)

    async def truncate_to(self, offset: int) -> None:
        unreadable = self.log.unreadable_from
        if unreadable is not None and offset <= unreadable:
            logger.warning(
                "%s-%d: cutting the log at offset %d, below its corrupt batch at %d: the "
                "leader's copy of the rest replaces it",
                self.log.topic,
                self.log.partition,
                offset,
                unreadable,
            )
        await self.log.truncate_to(offset)

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        await self.log.truncate_fully_and_start_at(offset)

    def update_high_watermark(self, high_watermark: int) -> None:
        self.log.update_high_watermark(high_watermark)
