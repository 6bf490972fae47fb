"""Kafka's TransactionCoordinator for one process's transactional ids (all of them with
one process, its hash shard in a cluster): the transaction APIs' decisions,
the markers that end a transaction, timeouts and expiration.

The markers go through a `MarkerWriter`: local appends with one process, and
WriteTxnMarkers to the leading process for partitions another process leads
(broker/transaction/marker_router.py). They are written before EndTxn is answered: the client
then sees its transaction complete, where Kafka answers after PrepareCommit and
lets a retriable CONCURRENT_TRANSACTIONS cover the gap. The order of durable
steps is Kafka's: the Prepare state is journalled before any marker, the
Complete state after all of them, so a crash in between is finished at start-up
(`complete_pending`) by writing the markers again (a second marker for an
already closed transaction changes nothing for readers).

Every operation on an id runs under that id's lock (EndTxn awaits marker
appends); operations on different ids interleave freely.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import attrs
import trio
import trio_util

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.topology import MarkerWriter
from broker.transaction.transaction_log import TransactionLog
from broker.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PendingOffset,
    TopicPartition,
    TransactionMetadata,
    is_epoch_exhausted,
)
from broker.transaction.transaction_state import TransactionState

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0
"""The epoch of a coordinator that never moves while it runs (one process, or the
processes of one host: a change of the process count restarts them all). Among hosts the
coordinator's epoch is the leader epoch of `__transaction_state` it loaded the state at
(`TransactionCoordinator.coordinator_epoch`), as in Kafka."""


class OffsetSink(Protocol):
    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, PendingOffset]
    ) -> None:
        """Make a committed transaction's offsets the group's committed offsets."""
        ...


@attrs.frozen
class TransactionConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000


@attrs.frozen
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig,
        journal: TransactionLog,
        markers: MarkerWriter,
        offsets: OffsetSink,
        allocate_producer_id: Callable[[], Awaitable[int]],
        clock_ms: Callable[[], int],
        *,
        owns: Callable[[str], bool] = lambda transactional_id: True,
    ) -> None:
        self.config = config
        self.journal = journal
        self.markers = markers
        self.offsets = offsets
        self._allocate = allocate_producer_id
        self._clock = clock_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._by_producer: dict[int, str] = {}
        # How many changes were made: the service's journal flusher follows the latest
        # value (changes made while it writes are coalesced into its next round).
        self.changes = trio_util.AsyncValue(0)
        # Whether this broker coordinates an id (Kafka: leads its `__transaction_state`
        # partition; the topology's `owns_transaction`); others answer NOT_COORDINATOR.
        self.owns = owns
        # Produce verification of a producer this coordinator does not know: with one
        # process that is an error; in a cluster its coordinator is another process.
        self.verify_unknown_producers = True
        # False while a new leader of `__transaction_state` reads it back.
        self.loaded = True
        # Written into every marker; the service sets it on each load. A replaced
        # coordinator's late markers carry an older one and are refused.
        self.coordinator_epoch = COORDINATOR_EPOCH
        # The marker writes in flight (each retrying until its markers are delivered).
        self._marker_writes: set[trio.CancelScope] = set()

    def drop_marker_writes(self) -> int:
        """Stop every marker write in flight, as Kafka's TransactionMarkerChannelManager
        removes the markers of a `__transaction_state` partition its coordinator unloads:
        the transactions stay prepared in the partition, for its next leader to finish,
        and their ids' locks are free at once. Returns how many were dropped."""
        for scope in self._marker_writes:
            scope.cancel()
        return len(self._marker_writes)

    def on_change(self) -> None:
        self.changes.value += 1

    def load(self, state: dict[str, TransactionMetadata]) -> None:
        self.transactions = dict(state)
        self._by_producer = {m.producer_id: tid for tid, m in state.items()}

    def _lock(self, transactional_id: str) -> trio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = trio.Lock()
        return lock

    async def _persist(self, metadata: TransactionMetadata) -> None:
        """Write the id's state and wait until it is stored (replicated where the state
        is kept in `__transaction_state`); KafkaError with the client's error if not."""
        try:
            self.journal.write(metadata)
        except OSError as exc:
            raise KafkaError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot write the transaction state: {exc}"
            ) from exc
        self._by_producer[metadata.producer_id] = metadata.transactional_id
        self.on_change()
        error = await self.journal.stored()
        if error is not ErrorCode.NONE:
            raise KafkaError(error, f"the state of {metadata.transactional_id!r} is not stored")

    async def _persist_answer(self, metadata: TransactionMetadata) -> ErrorCode:
        try:
            await self._persist(metadata)
        except KafkaError as exc:
            return exc.error_code
        return ErrorCode.NONE

    def _refusal(self, transactional_id: str) -> ErrorCode | None:
        """NOT_COORDINATOR for an id another broker coordinates; for one of ours while
        its state loads (a new leader of `__transaction_state`), COORDINATOR_LOAD_IN_PROGRESS."""
        if not self.owns(transactional_id):
            return ErrorCode.NOT_COORDINATOR
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    # -- InitProducerId ----------------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        refused = self._refusal(transactional_id)
        if refused is not None:
            return InitResult(refused)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        async with self._lock(transactional_id):
            now = self._clock()
            metadata = self.transactions.get(transactional_id)
            if metadata is None:
                metadata = TransactionMetadata(
                    transactional_id, await self._allocate(), NO_PRODUCER_EPOCH, timeout_ms
                )
                metadata.last_update_ms = now
                self.transactions[transactional_id] = metadata
            elif expected_producer_id != NO_PRODUCER_ID and not (
                metadata.is_valid_expected_producer(expected_producer_id)
            ):
                return InitResult(ErrorCode.PRODUCER_FENCED)
            if metadata.state.is_prepare:
                await self._complete(metadata)
            elif metadata.state is TransactionState.ONGOING:
                # A new instance of the producer: abort what the old one left open.
                if expected_producer_id != NO_PRODUCER_ID and (
                    expected_epoch not in (metadata.producer_epoch, NO_PRODUCER_EPOCH)
                ):
                    return InitResult(ErrorCode.PRODUCER_FENCED)
                await self._abort_fencing(metadata, "a new producer instance initialized")
                expected_epoch = NO_PRODUCER_EPOCH
            elif metadata.state is TransactionState.PREPARE_EPOCH_FENCE:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            new_id = None
            if is_epoch_exhausted(metadata.producer_epoch):
                new_id = await self._allocate()
            metadata.timeout_ms = timeout_ms
            error = metadata.bump_epoch(
                expected_epoch if expected_producer_id != NO_PRODUCER_ID else None,
                new_id,
                self._clock(),
            )
            if error is not ErrorCode.NONE:
                return InitResult(error)
            try:
                await self._persist(metadata)
            except KafkaError as exc:
                return InitResult(exc.error_code)
            log.info(
                "transactional id %r: producer id %d epoch %d",
                transactional_id,
                metadata.producer_id,
                metadata.producer_epoch,
            )
            return InitResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------
    async def _current(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TransactionMetadata:
        """The id's metadata, ready for a new step of its transaction, or the error."""
        refused = self._refusal(transactional_id)
        if refused is not None:
            raise KafkaError(refused, f"{transactional_id!r} is not coordinated here")
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                f"no producer id for transactional id {transactional_id!r}",
            )
        error = metadata.check_producer(producer_id, producer_epoch)
        if error is not ErrorCode.NONE:
            raise KafkaError(error, f"producer {producer_id} epoch {producer_epoch} is not current")
        if metadata.state.is_prepare:
            await self._complete(metadata)
        if metadata.state in (TransactionState.PREPARE_EPOCH_FENCE, TransactionState.DEAD):
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, metadata.state.value)
        return metadata

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        wanted = set(partitions)
        async with self._lock(transactional_id):
            try:
                metadata = await self._current(transactional_id, producer_id, producer_epoch)
            except KafkaError as exc:
                return exc.error_code
            if metadata.state is TransactionState.ONGOING and wanted <= metadata.partitions:
                return ErrorCode.NONE
            metadata.add_partitions(wanted, self._clock())
            return await self._persist_answer(metadata)

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        async with self._lock(transactional_id):
            try:
                metadata = await self._current(transactional_id, producer_id, producer_epoch)
            except KafkaError as exc:
                return exc.error_code
            if metadata.state is TransactionState.ONGOING and group_id in metadata.groups:
                return ErrorCode.NONE
            metadata.add_group(group_id, self._clock())
            return await self._persist_answer(metadata)

    def check_txn_offset_commit(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """TxnOffsetCommit on the process that also coordinates the transaction: the
        group must have been added with AddOffsetsToTxn first (what makes this
        coordinator send the group its marker), else the offsets would wait forever.
        Kafka's group coordinator cannot check this; a transaction coordinated by
        another process (or while loading) is not checked here either (NONE)."""
        if not self.owns(transactional_id) or not self.loaded:
            return ErrorCode.NONE
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        error = metadata.check_producer(producer_id, producer_epoch)
        if error is not ErrorCode.NONE:
            return error
        if metadata.state is not TransactionState.ONGOING or group_id not in metadata.groups:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # -- EndTxn ---------------------------------------------------------------------------------
    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        refused = self._refusal(transactional_id)
        if refused is not None:
            return refused
        async with self._lock(transactional_id):
            metadata = self.transactions.get(transactional_id)
            if metadata is None:
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING
            error = metadata.check_producer(producer_id, producer_epoch)
            if error is not ErrorCode.NONE:
                return error
            state = metadata.state
            if state.is_prepare:
                # A retry after a failed marker write: finish it, then answer as below.
                wanted = (
                    TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
                )
                try:
                    await self._complete(metadata)
                except KafkaError as exc:
                    return exc.error_code
                return ErrorCode.NONE if state is wanted else ErrorCode.INVALID_TXN_STATE
            if state is TransactionState.ONGOING:
                metadata.prepare_end(commit, self._clock())
                await self._persist(metadata)
                try:
                    await self._complete(metadata)
                except KafkaError as exc:
                    log.warning("transaction %r stays prepared: %s", transactional_id, exc)
                    if exc.error_code is ErrorCode.NOT_COORDINATOR:
                        return exc.error_code  # the client asks for the new coordinator
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
                return ErrorCode.NONE
            if state is TransactionState.COMPLETE_COMMIT:
                return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
            if state is TransactionState.COMPLETE_ABORT:
                return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE
            return ErrorCode.INVALID_TXN_STATE

    async def _complete(self, metadata: TransactionMetadata) -> None:
        """Write the markers of a prepared transaction, then journal its completion
        (KafkaError when a marker could not be written: it stays prepared)."""
        commit = metadata.state is TransactionState.PREPARE_COMMIT
        with trio.CancelScope() as write:
            self._marker_writes.add(write)
            try:
                await self.markers.write_markers(
                    metadata.producer_id,
                    metadata.producer_epoch,
                    commit,
                    sorted(metadata.partitions),
                    sorted(metadata.groups),
                    self.coordinator_epoch,
                )
            finally:
                self._marker_writes.discard(write)
        if write.cancelled_caught:
            raise KafkaError(
                ErrorCode.NOT_COORDINATOR,
                f"markers of {metadata.transactional_id!r} dropped: this broker no longer"
                f" coordinates it",
            )
        if commit:
            # Offsets held in the transaction's own record by an earlier version of
            # this broker (now the group coordinator holds them).
            for group_id, offsets in metadata.pending_offsets.items():
                self.offsets.commit_transactional_offsets(group_id, offsets)
        metadata.complete(self._clock())
        await self._persist(metadata)

    async def _abort_fencing(self, metadata: TransactionMetadata, why: str) -> None:
        log.info(
            "aborting the transaction of %r (producer %d epoch %d): %s",
            metadata.transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
            why,
        )
        now = self._clock()
        metadata.fence_epoch(now)
        metadata.prepare_end(False, now)
        await self._persist(metadata)
        await self._complete(metadata)

    # -- background work --------------------------------------------------------------------
    async def complete_pending(self) -> None:
        """Finish transactions a crash left prepared (start-up, then retried by the timer)."""
        for tid, metadata in list(self.transactions.items()):
            if metadata.state.is_prepare or metadata.state is TransactionState.PREPARE_EPOCH_FENCE:
                async with self._lock(tid):
                    try:
                        if metadata.state is TransactionState.PREPARE_EPOCH_FENCE:
                            metadata.prepare_end(False, self._clock())
                            await self._persist(metadata)
                        if metadata.state.is_prepare:
                            await self._complete(metadata)
                    except KafkaError as exc:
                        log.warning("transaction %r stays prepared: %s", tid, exc)

    async def abort_timed_out(self) -> int:
        """Kafka's abortTimedOutTransactions: open transactions older than their timeout
        are aborted with a bumped epoch, fencing the producer that let them expire."""
        aborted = 0
        for tid, metadata in list(self.transactions.items()):
            if metadata.state is not TransactionState.ONGOING:
                continue
            if self._clock() <= metadata.start_ms + metadata.timeout_ms:
                continue
            async with self._lock(tid):
                if (
                    metadata.state is TransactionState.ONGOING
                    and self._clock() > metadata.start_ms + metadata.timeout_ms
                ):
                    try:
                        await self._abort_fencing(metadata, "the transaction timed out")
                        aborted += 1
                    except KafkaError as exc:
                        log.warning("could not abort timed out transaction %r: %s", tid, exc)
        return aborted

    def next_timeout_ms(self) -> int | None:
        """When the earliest open transaction times out (wall clock ms)."""
        return min(
            (
                m.start_ms + m.timeout_ms
                for m in self.transactions.values()
                if m.state is TransactionState.ONGOING
            ),
            default=None,
        )

    def expire_transactional_ids(self) -> int:
        """Kafka's removeExpiredTransactionalIds: ids idle (no open transaction) for
        transactional.id.expiration.ms are forgotten."""
        now = self._clock()
        expired = [
            tid
            for tid, m in self.transactions.items()
            if m.state.is_complete
            and not (tid in self._locks and self._locks[tid].locked())
            and now - m.last_update_ms > self.config.id_expiration_ms
        ]
        for tid in expired:
            metadata = self.transactions.pop(tid)
            metadata.transition_to(TransactionState.DEAD, now)
            self._by_producer.pop(metadata.producer_id, None)
            self._locks.pop(tid, None)
            try:
                self.journal.write_removal(tid)
            except OSError as exc:
                log.error("cannot journal the expiry of %r: %s", tid, exc)
        if expired:
            self.on_change()
        return len(expired)

    # -- queries ----------------------------------------------------------------------------
    def transaction_of_producer(self, producer_id: int) -> TransactionMetadata | None:
        tid = self._by_producer.get(producer_id)
        return self.transactions.get(tid) if tid is not None else None

    def verify_partition(
        self, producer_id: int, producer_epoch: int, partition: TopicPartition
    ) -> ErrorCode:
        """Produce of a transactional batch (KIP-890's verification): the producer's
        transaction must be open and hold the partition, else the batch would open a
        transaction no marker ever closes (a hanging transaction)."""
        metadata = self.transaction_of_producer(producer_id)
        if metadata is None and not self.verify_unknown_producers:
            return ErrorCode.NONE
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch < metadata.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if metadata.state is not TransactionState.ONGOING or partition not in metadata.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn verify-only (KIP-890, what a partition leader in another
        process asks before it appends a transactional batch): Kafka's
        handleVerifyPartitionsInTransaction, by transactional id. Adds nothing."""
        wanted = list(partitions)

        def every(error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(wanted, error)

        if not transactional_id:
            return every(ErrorCode.INVALID_REQUEST)
        refused = self._refusal(transactional_id)
        if refused is not None:
            return every(refused)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return every(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return every(ErrorCode.PRODUCER_FENCED)
        if metadata.state.is_prepare or metadata.state is TransactionState.PREPARE_EPOCH_FENCE:
            return every(ErrorCode.CONCURRENT_TRANSACTIONS)
        ongoing = metadata.state is TransactionState.ONGOING
        return {
            tp: ErrorCode.NONE
            if ongoing and tp in metadata.partitions
            else ErrorCode.INVALID_TXN_STATE
            for tp in wanted
        }
