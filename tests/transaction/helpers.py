"""Fakes around the sans-IO-ish transaction coordinator: markers and offsets recorded
in memory, a clock under the test's control, the real journal on tmp_path."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.transaction_log import TransactionLog
from broker.transaction.transaction_metadata import PendingOffset, TopicPartition


class RecordingOffsets:
    def __init__(self) -> None:
        self.committed: dict[str, dict[TopicPartition, PendingOffset]] = {}

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, PendingOffset]
    ) -> None:
        self.committed.setdefault(group_id, {}).update(offsets)


class RecordingMarkers:
    """Markers per partition as (producer id, epoch, commit); can be made to fail. It
    also plays the group coordinator: offsets held by producer id (`pending`) until a
    group marker commits them into `offsets` or drops them."""

    def __init__(self, offsets: RecordingOffsets | None = None) -> None:
        self.markers: dict[TopicPartition, list[tuple[int, int, bool]]] = {}
        self.fail = False
        self.offsets = offsets or RecordingOffsets()
        self.pending: dict[int, dict[str, dict[TopicPartition, PendingOffset]]] = {}
        self.coordinator_epochs: list[int] = []  # of each write_markers

    async def write_markers(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        groups: Iterable[str],
        coordinator_epoch: int = 0,
    ) -> None:
        self.coordinator_epochs.append(coordinator_epoch)
        if self.fail:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "disk on fire")
        for tp in partitions:
            self.markers.setdefault(tp, []).append((producer_id, epoch, commit))
        if list(groups):
            held = self.pending.pop(producer_id, {})
            if commit:
                for group, offsets in held.items():
                    self.offsets.commit_transactional_offsets(group, offsets)

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        return {tp for groups in self.pending.values() for tp in groups.get(group_id, {})}


def txn_offset_commit(
    coordinator: TransactionCoordinator,
    markers: RecordingMarkers,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
    offsets: dict[TopicPartition, PendingOffset],
) -> ErrorCode:
    """TxnOffsetCommit as the handler does it: the coordinator's check, then the group
    coordinator (here `markers`) holds the offsets."""
    error = coordinator.check_txn_offset_commit(
        transactional_id, producer_id, producer_epoch, group_id
    )
    if error is ErrorCode.NONE:
        held = markers.pending.setdefault(producer_id, {}).setdefault(group_id, {})
        held.update(offsets)
    return error


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    async def __call__(self) -> int:
        self.next += 1
        return self.next


def make_coordinator(
    directory: Path,
    *,
    markers: RecordingMarkers | None = None,
    offsets: RecordingOffsets | None = None,
    clock: Clock | None = None,
    ids: Ids | None = None,
    max_timeout_ms: int = 60_000,
    id_expiration_ms: int = 3_600_000,
) -> TransactionCoordinator:
    journal = TransactionLog(directory)
    offsets = offsets or RecordingOffsets()
    coordinator = TransactionCoordinator(
        TransactionConfig(max_timeout_ms=max_timeout_ms, id_expiration_ms=id_expiration_ms),
        journal,
        markers or RecordingMarkers(offsets),
        offsets,
        ids or Ids(),
        clock or Clock(),
    )
    coordinator.load(journal.load())
    return coordinator
