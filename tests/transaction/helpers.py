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


class RecordingMarkers:
    """Markers per partition as (producer id, epoch, commit); can be made to fail."""

    def __init__(self) -> None:
        self.markers: dict[TopicPartition, list[tuple[int, int, bool]]] = {}
        self.fail = False

    async def write_markers(
        self, producer_id: int, epoch: int, commit: bool, partitions: Iterable[TopicPartition]
    ) -> None:
        if self.fail:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "disk on fire")
        for tp in partitions:
            self.markers.setdefault(tp, []).append((producer_id, epoch, commit))


class RecordingOffsets:
    def __init__(self) -> None:
        self.committed: dict[str, dict[TopicPartition, PendingOffset]] = {}

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, PendingOffset]
    ) -> None:
        self.committed.setdefault(group_id, {}).update(offsets)


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
    coordinator = TransactionCoordinator(
        TransactionConfig(max_timeout_ms=max_timeout_ms, id_expiration_ms=id_expiration_ms),
        journal,
        markers or RecordingMarkers(),
        offsets or RecordingOffsets(),
        ids or Ids(),
        clock or Clock(),
    )
    coordinator.load(journal.load())
    return coordinator
