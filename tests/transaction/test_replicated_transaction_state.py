"""The transaction coordinator over the replicated `__transaction_state` partition: the
records load back into the same state (compacted or not), a new leader loads before it
answers and finishes the transactions its predecessor left prepared, answers wait for
the in-sync replicas, failed appends reach the client as Kafka maps them, and one that
stops leading drops its marker writes in flight."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from broker.coordinator.group_metadata_partition import KeyedRecord
from broker.protocol.error_codes import ErrorCode
from broker.transaction.replicated_transaction_log import (
    ReplicatedTransactionLog,
    keyed_record,
    state_from_records,
)
from broker.transaction.transaction_coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.transaction_metadata import TransactionMetadata
from broker.transaction.transaction_service import TransactionCoordinatorService
from broker.transaction.transaction_state import TransactionState
from tests.coordinator.test_replicated_offset_store import FakePartition
from tests.transaction.helpers import Clock, Ids, RecordingMarkers, RecordingOffsets

TIDS = ("a", "b", "c")


def metadata(tid: str, epoch: int, state: TransactionState) -> TransactionMetadata:
    found = TransactionMetadata(tid, 7, epoch, 60_000, state=state)
    if state is not TransactionState.EMPTY:
        found.partitions = {("t", epoch % 3)}
    return found


changes = st.lists(
    st.tuples(
        st.sampled_from(TIDS),
        st.integers(0, 5),
        st.sampled_from(list(TransactionState)) | st.none(),  # None: the id expires
    ),
    max_size=30,
)


@given(changes)
def test_the_last_record_of_each_id_is_its_state_compacted_or_not(
    history: list[tuple[str, int, TransactionState | None]],
) -> None:
    records: list[KeyedRecord] = []
    expected: dict[str, dict[str, object]] = {}
    for tid, epoch, state in history:
        if state is None:
            records.append((tid.encode(), None))
            expected.pop(tid, None)
        else:
            written = metadata(tid, epoch, state)
            records.append(keyed_record(written))
            expected[tid] = written.to_record()
    compacted = list({key: (key, value) for key, value in records}.values())
    for replayed in (records, compacted):
        loaded = state_from_records(replayed)
        assert {tid: m.to_record() for tid, m in loaded.items()} == expected


def test_a_record_that_is_not_ours_is_skipped() -> None:
    good = keyed_record(metadata("a", 1, TransactionState.ONGOING))
    loaded = state_from_records([(b"x", b"not json"), (b"\xff", b"{}"), good])
    assert list(loaded) == ["a"]


def replicated_coordinator(
    partition: FakePartition, markers: RecordingMarkers
) -> TransactionCoordinator:
    return TransactionCoordinator(
        TransactionConfig(),
        ReplicatedTransactionLog(partition),
        markers,
        RecordingOffsets(),
        Ids(),
        Clock(),
    )


async def test_a_new_leader_loads_then_finishes_what_its_predecessor_left_prepared() -> None:
    prepared = metadata("a", 2, TransactionState.PREPARE_COMMIT)
    prepared.partitions = {("t", 0), ("t", 1)}
    partition = FakePartition([keyed_record(prepared)])
    markers = RecordingMarkers()
    coordinator = replicated_coordinator(partition, markers)
    service = TransactionCoordinatorService(
        coordinator, abort_interval_ms=60_000, expiration_interval_ms=60_000
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        answer = await coordinator.init_producer_id("b", 30_000)
        assert answer.error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

        partition.leadership.value = 1
        await trio.testing.wait_all_tasks_blocked()  # loaded, then the markers written
        assert coordinator.transactions["a"].state is TransactionState.COMPLETE_COMMIT
        assert markers.markers == {("t", 0): [(7, 2, True)], ("t", 1): [(7, 2, True)]}
        assert markers.coordinator_epochs == [1]  # the leader epoch it loaded at
        assert state_from_records(partition.records)["a"].state is (
            TransactionState.COMPLETE_COMMIT
        )

        answer = await coordinator.init_producer_id("b", 30_000)
        assert answer.error is ErrorCode.NONE
        assert state_from_records(partition.records)["b"].producer_epoch == 0

        partition.append_error = ErrorCode.NOT_ENOUGH_REPLICAS
        answer = await coordinator.init_producer_id("b", 30_000)
        assert answer.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition.append_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        answer = await coordinator.init_producer_id("b", 30_000)
        assert answer.error is ErrorCode.NOT_COORDINATOR

        partition.leadership.value = None
        await trio.testing.wait_all_tasks_blocked()
        assert not coordinator.transactions
        answer = await coordinator.init_producer_id("b", 30_000)
        assert answer.error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        nursery.cancel_scope.cancel()


class UndeliveredMarkers(RecordingMarkers):
    """Markers whose partitions' leaders cannot be reached while `reachable` is False:
    the write retries until it is cancelled (the channel manager's retries)."""

    def __init__(self) -> None:
        super().__init__()
        self.reachable = True
        self.dropped = 0

    async def write_markers(self, *args: Any, **kwargs: Any) -> None:
        if not self.reachable:
            try:
                await trio.sleep_forever()
            finally:
                self.dropped += 1
        await super().write_markers(*args, **kwargs)


async def test_a_coordinator_that_stops_leading_drops_its_marker_writes() -> None:
    prepared = metadata("a", 2, TransactionState.PREPARE_COMMIT)
    partition = FakePartition([keyed_record(prepared)])
    markers = UndeliveredMarkers()
    markers.reachable = False
    coordinator = replicated_coordinator(partition, markers)
    service = TransactionCoordinatorService(
        coordinator, abort_interval_ms=60_000, expiration_interval_ms=60_000
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        partition.leadership.value = 1  # loads "a", retries its markers
        await trio.testing.wait_all_tasks_blocked()
        assert markers.dropped == 0 and coordinator.transactions["a"].state.is_prepare

        partition.leadership.value = None
        await trio.testing.wait_all_tasks_blocked()
        assert markers.dropped == 1  # not left retrying for the next leader's transaction
        assert state_from_records(partition.records)["a"].state is (TransactionState.PREPARE_COMMIT)

        # Leading again, it finishes "a" at once: the dropped write held no lock.
        markers.reachable = True
        partition.leadership.value = 2
        await trio.testing.wait_all_tasks_blocked()
        assert state_from_records(partition.records)["a"].state is (
            TransactionState.COMPLETE_COMMIT
        )
        assert markers.coordinator_epochs == [2]

        # An EndTxn waiting on its markers when leadership goes answers NOT_COORDINATOR.
        started = await coordinator.init_producer_id("b", 30_000)
        pid, epoch = started.producer_id, started.producer_epoch
        assert await coordinator.add_partitions("b", pid, epoch, [("t", 5)]) is ErrorCode.NONE
        markers.reachable = False
        answers: list[ErrorCode] = []

        async def end_txn() -> None:
            answers.append(await coordinator.end_txn("b", pid, epoch, True))

        nursery.start_soon(end_txn)
        await trio.testing.wait_all_tasks_blocked()
        partition.leadership.value = None
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [ErrorCode.NOT_COORDINATOR] and markers.dropped == 2
        nursery.cancel_scope.cancel()
