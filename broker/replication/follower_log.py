"""What the replica fetcher needs from a follower's partition log.

The broker's log (broker/log) assigns offsets on append; a follower must keep the
leader's offsets and leader epochs instead, and must be able to cut its tail. This
protocol names exactly that, so the fetcher is tested over fakes and the wiring step
adapts the broker's PartitionLog once it has these operations.
"""

from __future__ import annotations

from typing import Protocol

from broker.replication.fetched_records import FetchedBatches
from broker.replication.leader_epoch_cache import LeaderEpochCache


class FollowerLog(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        """The partition's leader epochs; the log keeps it in step with its records."""
        ...

    async def append_as_follower(self, batches: FetchedBatches) -> None:
        """Append batches starting at the log end, keeping their offsets and leader epochs,
        and assign each new epoch's start in the epoch cache (and its checkpoint)."""

    async def truncate_to(self, offset: int) -> None:
        """Drop every record at `offset` or later, and the epochs starting there
        (`epoch_cache.truncate_from_end`). Nothing happens at or beyond the log end."""

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything; the log is empty and starts at `offset`."""

    def update_high_watermark(self, high_watermark: int) -> None:
        """The leader's high watermark as far as this log holds it."""
