"""The transaction coordinator as a broker service: load, timers, journal fsyncs.

Start-up replays the journal and finishes transactions a crash left prepared
before the network opens (in a cluster of processes, right after: their markers
may wait for processes that are starting too). Then, as Kafka does, one task aborts timed-out
transactions every `transaction.abort.timed.out.transaction.cleanup.interval.ms`
(also retrying prepared ones whose markers failed), one forgets idle ids every
`transaction.remove.expired.transaction.cleanup.interval.ms`, and one fsyncs the
journal shortly after it changes. On cancel the journal is fsynced and closed.

With the state in the replicated `__transaction_state` (hosts coordinated through
ZooKeeper; `ReplicatedTransactionLog`) there is no journal to load: each time this
broker becomes the partition's leader the coordinator reads its log back (answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile), then completes or aborts the transactions left
in PREPARE_COMMIT / PREPARE_ABORT by the coordinator before it, as Kafka's
TransactionStateManager does on loading; when it stops leading, it forgets them and
drops its marker writes in flight (their transactions stay prepared for the next
leader; an EndTxn waiting on them answers NOT_COORDINATOR).
"""

from __future__ import annotations

import logging
import time

import trio

from broker.coordinator.group_metadata_partition import (
    GroupMetadataPartition,
    read_while_leading,
)
from broker.transaction.replicated_transaction_log import (
    TRANSACTION_STATE,
    ReplicatedTransactionLog,
    state_from_records,
)
from broker.transaction.transaction_coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

JOURNAL_FLUSH_DELAY_S = 0.2


def wall_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinatorService:
    def __init__(
        self,
        coordinator: TransactionCoordinator,
        *,
        abort_interval_ms: int,
        expiration_interval_ms: int,
        complete_before_serving: bool = True,
    ) -> None:
        self.coordinator = coordinator
        self.abort_interval_ms = abort_interval_ms
        self.expiration_interval_ms = expiration_interval_ms
        self.complete_before_serving = complete_before_serving

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        journal = self.coordinator.journal
        if isinstance(journal, ReplicatedTransactionLog):
            await self._run_replicated(journal, task_status)
            return
        state = await trio.to_thread.run_sync(journal.load)
        self.coordinator.load(state)
        log.info("transaction coordinator loaded %d transactional ids", len(state))
        try:
            if self.complete_before_serving:
                await self.coordinator.complete_pending()
            async with trio.open_nursery() as nursery:
                if not self.complete_before_serving:
                    nursery.start_soon(self.coordinator.complete_pending)
                nursery.start_soon(self._run_abort_timed_out)
                nursery.start_soon(self._run_expiration)
                nursery.start_soon(self._run_journal_flush)
                task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(journal.close)

    async def _run_replicated(
        self, journal: ReplicatedTransactionLog, task_status: trio.TaskStatus[None]
    ) -> None:
        self.coordinator.loaded = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(journal.replicator.run)
            nursery.start_soon(self._run_abort_timed_out)
            nursery.start_soon(self._run_expiration)
            task_status.started()
            await self._follow_leadership(journal.partition, nursery)

    async def _follow_leadership(
        self, partition: GroupMetadataPartition, nursery: trio.Nursery
    ) -> None:
        """Kafka's loadTransactionsForTxnTopicPartition / removeTransactionsForTxnTopicPartition."""
        coordinator = self.coordinator
        journal = coordinator.journal
        assert isinstance(journal, ReplicatedTransactionLog)
        async for epoch in partition.leadership.eventual_values():
            coordinator.loaded = False
            dropped = coordinator.drop_marker_writes()
            if dropped:
                log.info(
                    "%s leadership changed: %d marker writes dropped", TRANSACTION_STATE, dropped
                )
            journal.replicator.drop_pending()
            coordinator.load({})
            if epoch is None:
                log.info("%s leadership lost: forgetting the transactions", TRANSACTION_STATE)
                continue
            records = await read_while_leading(partition, epoch)
            if records is None or partition.leadership.value != epoch:
                continue
            coordinator.load(state_from_records(records))
            coordinator.coordinator_epoch = epoch
            coordinator.loaded = True
            log.info(
                "transaction coordinator loaded %d transactional ids from %s (leader epoch %d)",
                len(coordinator.transactions),
                TRANSACTION_STATE,
                epoch,
            )
            nursery.start_soon(coordinator.complete_pending)

    async def _run_abort_timed_out(self) -> None:
        while True:
            await trio.sleep(self.abort_interval_ms / 1000)
            await self.coordinator.complete_pending()
            aborted = await self.coordinator.abort_timed_out()
            if aborted:
                log.info("aborted %d timed out transactions", aborted)

    async def _run_expiration(self) -> None:
        while True:
            await trio.sleep(self.expiration_interval_ms / 1000)
            expired = self.coordinator.expire_transactional_ids()
            if expired:
                log.info("removed %d expired transactional ids", expired)

    async def _run_journal_flush(self) -> None:
        journal = self.coordinator.journal
        async for _ in self.coordinator.changes.eventual_values(lambda changes: changes > 0):
            await trio.sleep(JOURNAL_FLUSH_DELAY_S)
            if journal.needs_compaction():
                data = journal.begin_compaction(list(self.coordinator.transactions.values()))
                try:
                    await trio.to_thread.run_sync(journal.write_compacted, data)
                except OSError as exc:
                    journal.abandon_compaction()
                    log.error("cannot compact the transaction journal: %s", exc)
                    continue
                journal.finish_compaction()
            await trio.to_thread.run_sync(journal.flush)
