"""A FollowerLog over the broker's own PartitionLog, through its public methods only:
what a follower among hosts replicates into until the log has follower operations.

Appending at the log end keeps the leader's offsets, since the follower's log end is
where the leader's next batch starts; each batch keeps the leader epoch the leader
stamped (the log stamps its own `leader_epoch`, set to the batch's before the
append). The broker's log cannot cut its tail yet (docs/replication.md), so this
serves followers whose log is a prefix of the leader's: a fetch that would need a
truncation, or that does not continue the log, stops replicating the partition
here with one error line instead of writing a log that differs from the leader's.
"""

from __future__ import annotations

import logging

from broker.log.partition_log import PartitionLog
from broker.protocol.records import iter_batches
from broker.replication.fetched_records import FetchedBatches
from broker.replication.leader_epoch_cache import LeaderEpochCache

log = logging.getLogger(__name__)


class PartitionLogFollower:
    def __init__(self, log: PartitionLog) -> None:
        self._log = log
        self._epoch_cache = LeaderEpochCache()
        self._high_watermark = 0
        # Why this follower stopped copying (None while it copies).
        self.stopped: str | None = None

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
        if self.stopped is not None:
            return
        for header, data in iter_batches(batches.records):
            if header.base_offset != self._log.log_end_offset:
                self._stop(f"the leader's batch at {header.base_offset} does not continue it")
                return
            self._log.leader_epoch = header.partition_leader_epoch
            result = await self._log.append(data, header)
            if (result.base_offset, result.last_offset) != (header.base_offset, header.last_offset):
                self._stop(f"the log gave offsets {result.base_offset}..{result.last_offset}")
                return
        for start in batches.epoch_starts:
            self._epoch_cache.assign(start.epoch, start.start_offset)

    async def truncate_to(self, offset: int) -> None:
        if offset < self._log.log_end_offset:
            self._stop(f"the log cannot truncate to {offset} yet")

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        self._stop(f"the log cannot restart at {offset} yet")

    def update_high_watermark(self, high_watermark: int) -> None:
        self._high_watermark = high_watermark

    def _stop(self, why: str) -> None:
        self.stopped = why
        log.error(
            "stopped replicating %s-%d at %d: %s",
            self._log.topic,
            self._log.partition,
            self._log.log_end_offset,
            why,
        )
