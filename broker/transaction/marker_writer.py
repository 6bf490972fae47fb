"""The coordinator's WriteTxnMarkers where the target is this process: markers go
straight into the partitions' logs, and a group's marker straight to the group
coordinator, which commits or drops the transaction's pending offsets.

The WriteTxnMarkers handler (broker/handlers/write_txn_markers.py) uses the same
appends for markers other processes send."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.offset_store import OffsetAndMetadata
from broker.errors import KafkaError
from broker.log.log_manager import LogManager
from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_coordinator import COORDINATOR_EPOCH
from broker.transaction.transaction_metadata import PendingOffset, TopicPartition

log = logging.getLogger(__name__)

SKIPPED_MARKER_ERRORS = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH)
"""Deleted meanwhile, or a newer epoch already wrote there: Kafka's marker handler drops
the partition from the pending set too."""


MARKER_REPLICATION_TIMEOUT_S = 5.0


class MarkerReplication(Protocol):
    """The deployment's `replication` (broker/handlers/replica_tracking.py)."""

    async def wait_for_acks(
        self, topic: str, partition: int, required_offset: int, timeout_s: float
    ) -> ErrorCode: ...


class LocalMarkerWriter:
    def __init__(
        self,
        log_manager: LogManager,
        groups: GroupCoordinatorService,
        *,
        on_marker: Callable[[int, str, int], None] = lambda producer_id, topic, index: None,
        replication: MarkerReplication | None = None,
    ) -> None:
        self._logs = log_manager
        self._groups = groups
        # Where partitions are replicated a marker counts once every in-sync replica
        # holds it (Kafka writes markers with acks=all): a new leader must not lack the
        # marker of a transaction its coordinator has completed.
        self._replication = replication
        # Told of each partition marker before it is written: a transaction verified
        # there (KIP-890, the topology's `on_marker`) must be verified again.
        self._on_marker = on_marker

    async def write_partition_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        topic: str,
        index: int,
        coordinator_epoch: int = COORDINATOR_EPOCH,
    ) -> None:
        """One marker; KafkaError when it cannot be written (a skipped one is no error)."""
        self._on_marker(producer_id, topic, index)
        partition = self._logs.partition(topic, index)
        if partition is None or partition.deleted:
            log.info("no marker for %s-%d: the partition is gone", topic, index)
            return
        try:
            offset = await partition.append_control(
                producer_id, epoch, commit=commit, coordinator_epoch=coordinator_epoch
            )
        except KafkaError as exc:
            if exc.error_code in SKIPPED_MARKER_ERRORS:
                log.info("no marker for %s-%d: %s", topic, index, exc)
                return
            raise
        if self._replication is not None:
            error = await self._replication.wait_for_acks(
                topic, index, offset + 1, MARKER_REPLICATION_TIMEOUT_S
            )
            if error is not ErrorCode.NONE:
                raise KafkaError(error, f"the marker of {topic}-{index} is not replicated")

    async def write_group_marker(self, producer_id: int, epoch: int, commit: bool) -> None:
        """The group coordinator commits or drops the producer's pending offsets; where
        they are kept in a replicated `__consumer_offsets`, once the ISR holds that."""
        self._groups.complete_transaction(producer_id, epoch, commit)
        error = await self._groups.stored()
        if error is not ErrorCode.NONE:
            raise KafkaError(error, f"the group marker of producer {producer_id} is not stored")

    async def write_markers(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        groups: Iterable[str],
        coordinator_epoch: int = COORDINATOR_EPOCH,
    ) -> None:
        for topic, index in partitions:
            await self.write_partition_marker(
                producer_id, epoch, commit, topic, index, coordinator_epoch
            )
        if any(True for _ in groups):
            await self.write_group_marker(producer_id, epoch, commit)


class GroupOffsetSink:
    """Commits offsets that an earlier version held in the transaction's record."""

    def __init__(self, groups: GroupCoordinatorService) -> None:
        self._groups = groups

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, PendingOffset]
    ) -> None:
        self._groups.commit_transactional_offsets(
            group_id,
            {
                tp: OffsetAndMetadata(offset, epoch, metadata)
                for tp, (offset, epoch, metadata) in offsets.items()
            },
        )
