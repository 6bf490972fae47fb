"""What the replica fetcher needs from the network: requests to one leader broker.

Each call is one Kafka request over the follower's connection to the leader:
OffsetsForLeaderEpoch, Fetch (replica id = the follower's broker id, so the leader
serves up to its log end and counts the fetch for the ISR) and ListOffsets for the
leader's earliest and latest offsets. A call raises (OSError, ConnectionError,
trio.BrokenResourceError, KafkaError) when the request as a whole failed; the fetcher
then backs off every partition of it. Per-partition errors come back in the answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import attrs

from broker.protocol.error_codes import ErrorCode
from broker.replication.fetcher_partition_state import (
    SendFetch,
    SendListOffsets,
    SendOffsetsForLeaderEpoch,
)
from broker.replication.leader_epoch_cache import EpochEndOffset
from broker.replication.topic_partition import TopicPartition


@attrs.frozen
class FetchedPartition:
    error: ErrorCode
    high_watermark: int = -1
    records: bytes | memoryview = b""
    """A view of the response's frame, as received: never copied on the way to the log."""
    diverging_epoch: EpochEndOffset | None = None  # Fetch v12+ (KIP-595)


@attrs.frozen
class EpochEndOffsetAnswer:
    error: ErrorCode
    end: EpochEndOffset


@attrs.frozen
class LeaderOffsets:
    error: ErrorCode
    log_start_offset: int = -1
    log_end_offset: int = -1


@attrs.frozen
class FetchLimits:
    """replica.fetch.wait.max.ms, replica.fetch.min.bytes, replica.fetch.max.bytes (per
    partition) and replica.fetch.response.max.bytes, as Kafka names them."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    partition_max_bytes: int = 1048576
    response_max_bytes: int = 10485760


class LeaderFetchSession(Protocol):
    """The requests a follower sends one leader. A `fetch` may be cancelled in flight
    (ReplicaFetcher interrupts its long poll when a partition is added): the session
    must stay usable (the broker's drops the connection whose answer it will not read,
    broker/hosts/replica_fetchers.py)."""

    async def offsets_for_leader_epoch(
        self, partitions: Mapping[TopicPartition, SendOffsetsForLeaderEpoch]
    ) -> Mapping[TopicPartition, EpochEndOffsetAnswer]: ...

    async def fetch(
        self, partitions: Mapping[TopicPartition, SendFetch], limits: FetchLimits
    ) -> Mapping[TopicPartition, FetchedPartition]:
        """Waits at the leader up to `limits.max_wait_ms` for new records."""
        ...

    async def list_offsets(
        self, partitions: Mapping[TopicPartition, SendListOffsets]
    ) -> Mapping[TopicPartition, LeaderOffsets]: ...
