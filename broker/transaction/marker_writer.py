"""The coordinator's WriteTxnMarkers, local: markers go straight into the partitions'
logs, and a committed transaction's offsets straight into the group coordinator."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.offset_store import OffsetAndMetadata
from broker.errors import KafkaError
from broker.log import LogManager
from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_coordinator import COORDINATOR_EPOCH
from broker.transaction.transaction_metadata import PendingOffset, TopicPartition

log = logging.getLogger(__name__)


class LocalMarkerWriter:
    def __init__(self, log_manager: LogManager) -> None:
        self._logs = log_manager

    async def write_markers(
        self, producer_id: int, epoch: int, commit: bool, partitions: Iterable[TopicPartition]
    ) -> None:
        for topic, index in partitions:
            partition = self._logs.partition(topic, index)
            if partition is None or partition.deleted:
                log.info("no marker for %s-%d: the partition is gone", topic, index)
                continue
            try:
                await partition.append_control(
                    producer_id, epoch, commit=commit, coordinator_epoch=COORDINATOR_EPOCH
                )
            except KafkaError as exc:
                if exc.error_code in (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                ):
                    # Deleted meanwhile, or a newer epoch already wrote here: Kafka's
                    # marker handler drops the partition from the pending set too.
                    log.info("no marker for %s-%d: %s", topic, index, exc)
                    continue
                raise


class GroupOffsetSink:
    """Commits a transaction's offsets into the group coordinator's offset store."""

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
