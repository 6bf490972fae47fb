"""What a follower needs to know of the record batches a leader's Fetch returned.

A Fetch answer holds whole v2 batches, perhaps followed by a fragment of one cut at
the size limit. The follower appends the whole ones with their offsets and leader
epochs as the leader wrote them, and records in its epoch cache where each epoch
starts (Kafka's Log.appendAsFollower), so that it can answer OffsetsForLeaderEpoch
the same way the leader would.

Each batch is checked here once (framing, CRC, codec, counts), as Kafka's follower
validates a fetched batch once; the checked headers go with the batches to the log's
append, which then neither parses nor checks them again.
"""

from __future__ import annotations

import attrs

from broker.protocol.records import LOG_OVERHEAD, RecordBatchHeader, iter_batches
from broker.replication.leader_epoch_cache import EpochEntry


@attrs.frozen
class FetchedBatches:
    records: bytes | memoryview  # the whole batches only, a view of what was fetched
    base_offset: int | None  # the first batch's, None when there are none
    end_offset: int | None  # one past the last batch's last offset
    epoch_starts: tuple[EpochEntry, ...]  # each epoch and the first offset the answer has of it
    checked: tuple[tuple[RecordBatchHeader, memoryview], ...] = ()
    """Each whole batch's header and bytes, checked as a log append checks them."""


def fetched_batches(records: bytes | bytearray | memoryview) -> FetchedBatches:
    """CorruptRecords-style errors (InvalidRecordsError) propagate: the caller treats a
    corrupt answer as a failed fetch."""
    size = 0
    base: int | None = None
    end: int | None = None
    starts: list[EpochEntry] = []
    checked = tuple(iter_batches(records, allow_partial_tail=True))
    for header, _batch in checked:
        if base is None:
            base = header.base_offset
        end = header.last_offset + 1
        size += header.batch_length + LOG_OVERHEAD
        if header.partition_leader_epoch >= 0 and (
            not starts or starts[-1].epoch != header.partition_leader_epoch
        ):
            starts.append(EpochEntry(header.partition_leader_epoch, header.base_offset))
    view = memoryview(records)
    whole = view[:size] if size < len(view) else view
    return FetchedBatches(whole, base, end, tuple(starts), checked)
