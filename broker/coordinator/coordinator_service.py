"""The group coordinator as a broker service: Trio timers and disk work around the
sans-IO `GroupCoordinator`.

One task sleeps until the earliest group deadline (woken early when an
operation creates an earlier one), one fsyncs the offset journal shortly
after it changes (and rolls it into a snapshot when it has grown), one
expires old offsets on `offsets.retention.check.interval.ms`. When cancelled
the journal is fsynced and closed, shielded, so acknowledged commits survive.

Given a replicated `GroupMetadataPartition` (hosts coordinated through ZooKeeper) the
state lives in `__consumer_offsets` instead of the journal: the coordinator starts
empty, loads the groups from the partition's log each time this broker becomes its
leader (COORDINATOR_LOAD_IN_PROGRESS meanwhile), forgets them when it stops leading,
and answers a commit once the in-sync replicas hold it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

from broker.coordinator.consumer_group import ConsumerGroup, HeartbeatParams, HeartbeatResult
from broker.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator
from broker.coordinator.consumer_group_records import group_records, load_consumer_group
from broker.coordinator.group_coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    GroupOverview,
    OffsetCommitItem,
)
from broker.coordinator.group_metadata_partition import (
    GroupMetadataPartition,
    KeyedRecord,
    read_while_leading,
)
from broker.coordinator.member_metadata import (
    JoinCallback,
    JoinParams,
    JoinResult,
    SyncCallback,
    SyncResult,
)
from broker.coordinator.offset_store import OffsetAndMetadata, OffsetStore, TopicPartition
from broker.coordinator.pending_txn_offsets import PendingOffset, PendingTransactionalOffsets
from broker.coordinator.replicated_offset_store import (
    AppendRound,
    OffsetReplicator,
    ReplicatedOffsetStore,
)
from broker.coordinator.replicated_pending_offsets import (
    ReplicatedPendingOffsets,
    is_pending_key,
)
from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.topology import Topology

log = logging.getLogger(__name__)

JOURNAL_FLUSH_DELAY_S = 0.2
"""How long journal appends gather before one fsync (commits are acknowledged
once written to the page cache, as Kafka acknowledges a single-replica append)."""


def wall_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinatorService:
    def __init__(
        self,
        config: CoordinatorConfig,
        directory: Path,
        topology: Topology | None = None,
        partition: GroupMetadataPartition | None = None,
    ) -> None:
        """`topology` places the groups: another broker's are refused with NOT_COORDINATOR
        (None: this broker coordinates every group). With `partition` the offsets and
        groups are kept there instead of in `directory`'s journal."""
        self.config = config
        self._topology = topology
        self._partition = partition
        self._replicator: OffsetReplicator | None = None
        self.store: OffsetStore
        if partition is None:
            self.store = OffsetStore(directory)
        else:
            self._replicator = OffsetReplicator(partition)
            self.store = ReplicatedOffsetStore(self._replicator.enqueue)
        self._loaded = partition is None
        self._tasks: trio.Nursery | None = None
        self._coordinator: GroupCoordinator | None = None
        self._wakeup = trio.Event()
        self._sleeping_until = math.inf
        self._journal_changed = trio.Event()
        self.pending_transactions = (
            PendingTransactionalOffsets(directory)
            if self._replicator is None
            else ReplicatedPendingOffsets(self._replicator.enqueue)
        )
        self.consumer_groups = ConsumerGroupCoordinator(config.consumer)

    @property
    def coordinator(self) -> GroupCoordinator:
        if self._coordinator is None:
            raise RuntimeError("the group coordinator has not started")
        return self._coordinator

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.to_thread.run_sync(self.store.load)
        await trio.to_thread.run_sync(self.pending_transactions.load)
        self._coordinator = GroupCoordinator(self.config, self.store, wall_ms(), self.now())
        self._load_consumer_groups()
        log.info(
            "group coordinator loaded %d groups (%d consumer groups) from %s",
            len(self._coordinator.groups),
            len(self.consumer_groups.groups),
            self.store.directory,
        )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_timers)
                nursery.start_soon(self._run_journal_flush)
                nursery.start_soon(self._run_offset_expiry)
                self._tasks = nursery
                if self._replicator is not None:
                    nursery.start_soon(self._replicator.run)
                    nursery.start_soon(self._follow_leadership)
                task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.store.close)
                await trio.to_thread.run_sync(self.pending_transactions.close)

    # -- timers ------------------------------------------------------------------------
    @staticmethod
    def now() -> float:
        # A microsecond of slack so a deadline reached by trio's clock counts as due.
        return trio.current_time() * 1000 + 0.001

    async def _run_timers(self) -> None:
        while True:
            self._wakeup = trio.Event()
            deadline = self._next_timer()
            self._sleeping_until = math.inf if deadline is None else deadline
            with trio.move_on_at(self._sleeping_until / 1000):
                await self._wakeup.wait()
            self._sleeping_until = -math.inf
            self.coordinator.fire_timers(self.now(), wall_ms())
            self._fire_consumer_group_timers()
            self._after_change()

    def _after_change(self) -> None:
        """Run what is due now; wake the timer task if it sleeps past the next deadline."""
        coordinator = self.coordinator
        deadline = self._next_timer()
        if deadline is not None and deadline <= self.now():
            coordinator.fire_timers(self.now(), wall_ms())
            self._fire_consumer_group_timers()
            deadline = self._next_timer()
        if deadline is not None and deadline < self._sleeping_until:
            self._wakeup.set()
        self._journal_changed.set()

    # -- durability ------------------------------------------------------------------------
    async def _run_journal_flush(self) -> None:
        while True:
            await self._journal_changed.wait()
            self._journal_changed = trio.Event()
            await trio.sleep(JOURNAL_FLUSH_DELAY_S)
            if self.store.needs_snapshot():
                snapshot = self.store.begin_snapshot()
                await trio.to_thread.run_sync(self.store.write_snapshot, *snapshot)
            else:
                await trio.to_thread.run_sync(self.store.flush)
            await trio.to_thread.run_sync(self.pending_transactions.flush)

    async def _run_offset_expiry(self) -> None:
        while True:
            await trio.sleep(self.config.retention_check_interval_ms / 1000)
            expired = self.coordinator.expire_offsets(wall_ms())
            if expired:
                log.info("expired %d committed offsets", expired)
            self._after_change()

    # -- the replicated partition's leadership (Kafka's loadGroupsForPartition) ------------
    async def _follow_leadership(self) -> None:
        partition, store = self._partition, self.store
        assert partition is not None and isinstance(store, ReplicatedOffsetStore)
        async for epoch in partition.leadership.eventual_values():
            if self._loaded:
                log.info("__consumer_offsets leadership changed: forgetting the groups")
            self._reset(store, ())
            if epoch is None:
                continue
            records = await read_while_leading(partition, epoch)
            if records is None or partition.leadership.value != epoch:
                continue  # moved again while reading: the next value decides
            skipped = self._reset(store, records)
            self._loaded = True
            log.info(
                "group coordinator at leader epoch %d: loaded %d groups from %d records (%d skipped)",
                epoch,
                len(self.coordinator.groups),
                len(records),
                skipped,
            )
            self._after_change()

    def _reset(self, store: ReplicatedOffsetStore, records: Sequence[KeyedRecord]) -> int:
        """The state as `records` say, nothing loaded until the caller says so."""
        assert self._replicator is not None
        self._loaded = False
        self._replicator.drop_pending()
        if self._coordinator is not None:
            _answer_waiting_members(self._coordinator, ErrorCode.NOT_COORDINATOR)
        pending = self.pending_transactions
        if isinstance(pending, ReplicatedPendingOffsets):
            pending.reset(r for r in records if is_pending_key(r[0]))
        skipped = store.reset(r for r in records if not is_pending_key(r[0]))
        self._coordinator = GroupCoordinator(self.config, store, wall_ms(), self.now())
        self._load_consumer_groups()
        return skipped

    def _load_consumer_groups(self) -> None:
        """The KIP-848 groups as their records say (Kafka's replay and onLoaded); a group's
        committed offsets made the classic coordinator load an empty classic group of
        the same id, which gives way."""
        self.consumer_groups = ConsumerGroupCoordinator(self.config.consumer)
        now = self.now()
        for group_id, records in self.store.state.consumer_groups.items():
            try:
                group = load_consumer_group(group_id, records, self.config.consumer, now)
            except (KeyError, ValueError, TypeError) as exc:
                log.warning("consumer group %s: records not ours, not loaded: %r", group_id, exc)
                continue
            self.coordinator.remove_empty_group(group_id)
            self.consumer_groups.add_loaded(group)

    def _store_consumer_group(self, group_id: str) -> None:
        """Write the records of what changed in the group (Kafka writes them with each
        operation; here they are the difference from those last written)."""
        group = self.consumer_groups.groups.get(group_id)
        if group is None or (not group.members and group.group_epoch == 0):
            records = {}  # gone, or never joined (a first heartbeat that failed)
        else:
            records = group_records(group)
        self.store.write_consumer_group(group_id, records)

    async def stored(self) -> ErrorCode:
        """Once the records written so far are replicated (at once with journals): NONE,
        or the error a client is told to retry with (Kafka answers a consumer group's
        heartbeat once its records are committed)."""
        last = None if self._replicator is None else self._replicator.last_written()
        return ErrorCode.NONE if last is None else await last.client_error()

    async def replicated(
        self, results: dict[TopicPartition, ErrorCode]
    ) -> dict[TopicPartition, ErrorCode]:
        """A commit's results once what it wrote is replicated (at once with journals):
        a failed append turns every accepted offset into the client's retriable error."""
        wait = self.replication_of(results)
        return results if wait is None else await wait()

    def replication_of(
        self, results: dict[TopicPartition, ErrorCode]
    ) -> Callable[[], Awaitable[dict[TopicPartition, ErrorCode]]] | None:
        """`replicated` bound now to the append round the commit's records joined, to be
        awaited later (outside the handler); None when nothing is to be waited for."""
        pending = None if self._replicator is None else self._replicator.pending()
        if pending is None:
            return None

        async def wait() -> dict[TopicPartition, ErrorCode]:
            error = await pending.client_error()
            if error is ErrorCode.NONE:
                return results
            return {tp: error if e is ErrorCode.NONE else e for tp, e in results.items()}

        return wait

    # -- operations (called by the API handlers) ------------------------------------------
    def _owns(self, group_id: str) -> bool:
        return self._topology is None or self._topology.owns_group(group_id)

    def _refusal(self, group_id: str) -> KafkaError | None:
        """Another broker's group: NOT_COORDINATOR makes the client look it up again;
        ours while the partition's groups load: COORDINATOR_LOAD_IN_PROGRESS."""
        if not self._owns(group_id):
            assert self._topology is not None
            node = self._topology.coordinator_node(group_id)
            return KafkaError(
                ErrorCode.NOT_COORDINATOR, f"group {group_id!r} is coordinated by broker {node}"
            )
        if not self._loaded:
            return KafkaError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"group {group_id!r} is loading"
            )
        return None

    def _check(self, group_id: str) -> None:
        refusal = self._refusal(group_id)
        if refusal is not None:
            raise refusal

    def join(self, group_id: str, params: JoinParams, callback: JoinCallback) -> None:
        self._check(group_id)
        if self.consumer_groups.is_active(group_id):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, params.member_id))
            return
        if group_id in self.consumer_groups.groups:
            self.consumer_groups.forget_empty(group_id)
            self._store_consumer_group(group_id)
        self.coordinator.join(group_id, params, self.now(), wall_ms(), callback)
        self._after_change()

    def sync(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        self._check(group_id)
        self.coordinator.sync(
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
            self.now(),
            wall_ms(),
            self._once_stored(callback),
        )
        self._after_change()

    def _once_stored(self, callback: SyncCallback) -> SyncCallback:
        """Kafka answers SyncGroup once the group's GroupMetadata record is stored: with a
        replicated partition a successful answer waits for the append holding it."""
        replicator, tasks = self._replicator, self._tasks
        if replicator is None or tasks is None:
            return callback

        def answer(result: SyncResult) -> None:
            pending = replicator.pending()
            if pending is None or result.error is not ErrorCode.NONE:
                callback(result)
            else:
                tasks.start_soon(_answer_when_stored, pending, result, callback)

        return answer

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        self._check(group_id)
        error = self.coordinator.heartbeat(
            group_id, member_id, group_instance_id, generation_id, self.now()
        )
        self._after_change()
        return error

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        self._check(group_id)
        result = self.coordinator.leave(group_id, members, self.now(), wall_ms())
        self._after_change()
        return result

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitItem],
        api_version: int,
    ) -> dict[TopicPartition, ErrorCode]:
        self._check(group_id)
        if group_id in self.consumer_groups.groups:
            return self._commit_consumer_group_offsets(
                group_id, generation_id, member_id, offsets, api_version
            )
        result = self.coordinator.commit_offsets(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            offsets,
            api_version,
            self.now(),
            wall_ms(),
        )
        self._after_change()
        return result

    def validate_transactional_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """TxnOffsetCommit v3+ names the member and generation (KIP-447), checked as
        OffsetCommit's; earlier versions name neither and pass (Kafka's rule); an unknown
        group accepts generation -1."""
        self._check(group_id)
        consumer_group = self.consumer_groups.groups.get(group_id)
        if consumer_group is not None:
            return consumer_group.validate_offset_commit(member_id, generation_id, 9, True)
        return self.coordinator.validate_transactional_commit(
            group_id, member_id, group_instance_id, generation_id
        )

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """A committed transaction's offsets (TxnOffsetCommit), stamped now."""
        now = wall_ms()
        self.store.commit(
            group_id,
            {
                tp: OffsetAndMetadata(om.offset, om.leader_epoch, om.metadata, now)
                for tp, om in offsets.items()
            },
        )
        self._journal_changed.set()

    # -- transactional offsets (Kafka's pendingTransactionalOffsetCommits) ------------------
    def add_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, PendingOffset],
    ) -> ErrorCode:
        """TxnOffsetCommit: hold the offsets until the transaction's marker."""
        self._check(group_id)
        try:
            held = self.pending_transactions.add(group_id, producer_id, producer_epoch, offsets)
        except OSError as exc:
            raise KafkaError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot journal the offsets: {exc}"
            ) from exc
        self._journal_changed.set()
        return ErrorCode.NONE if held else ErrorCode.PRODUCER_FENCED

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """The transaction's marker for this group shard: a commit makes the producer's
        pending offsets the groups' committed offsets, an abort drops them."""
        pending = self.pending_transactions.offsets_of(producer_id)
        if commit:
            for group_id, offsets in pending.items():
                self.commit_transactional_offsets(
                    group_id,
                    {tp: OffsetAndMetadata(o, e, m) for tp, (o, e, m) in offsets.items()},
                )
        try:
            self.pending_transactions.forget(producer_id, producer_epoch)
        except OSError as exc:
            raise KafkaError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot journal the marker: {exc}"
            ) from exc
        self._journal_changed.set()

    def pending_transactional_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group whose offsets wait in an open transaction (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return self.pending_transactions.pending_partitions(group_id)

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        self._check(group_id)
        consumer_group = self.consumer_groups.groups.get(group_id)
        if consumer_group is not None:
            return ErrorCode.NONE, self._delete_consumer_group_offsets(consumer_group, partitions)
        result = self.coordinator.delete_offsets(group_id, partitions)
        self._after_change()
        return result

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        refusals = {g: r.error_code for g in group_ids if (r := self._refusal(g)) is not None}
        mine = [g for g in group_ids if g not in refusals]
        consumer = [g for g in mine if g in self.consumer_groups.groups]
        result = self.coordinator.delete_groups([g for g in mine if g not in consumer])
        for group_id in consumer:
            result[group_id] = self.consumer_groups.delete_group(group_id)
            if result[group_id] is ErrorCode.NONE:
                self.store.delete_group(group_id)  # its offsets and its records
        result |= refusals
        self._after_change()
        return result

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[tuple[TopicPartition, OffsetAndMetadata | None]]]:
        """OffsetFetch: the group's committed offsets (NOT_COORDINATOR elsewhere). From
        v9 a member of a consumer group names itself and its epoch, checked as Kafka's
        ConsumerGroup.validateOffsetFetch checks them."""
        refusal = self._refusal(group_id)
        if refusal is not None:
            return refusal.error_code, []
        consumer_group = self.consumer_groups.groups.get(group_id)
        if consumer_group is not None:
            error = consumer_group.validate_offset_fetch(member_id, member_epoch)
            if error is not ErrorCode.NONE:
                return error, []
        return self.coordinator.fetch_offsets(group_id, partitions)

    # -- KIP-848 consumer groups (broker/coordinator/consumer_group.py) ---------------------
    def _next_timer(self) -> float | None:
        deadlines = [
            d
            for d in (self.coordinator.next_timer(), self.consumer_groups.next_timer())
            if d is not None
        ]
        return min(deadlines) if deadlines else None

    def _fire_consumer_group_timers(self) -> None:
        fenced = self.consumer_groups.fire_timers(self.now())
        for group_id, member_id in fenced:
            log.info("consumer group %s: member %s fenced (timed out)", group_id, member_id)
        for group_id in sorted({g for g, _ in fenced}):
            self._store_consumer_group(group_id)

    def consumer_group_heartbeat(
        self,
        group_id: str,
        params: HeartbeatParams,
        api_version: int,
        topics: dict[str, int],
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat; `topics` maps every topic to its partition count. A
        classic group with members keeps its id (Kafka's GROUP_ID_NOT_FOUND); an empty
        one becomes a consumer group, its committed offsets kept."""
        self._check(group_id)
        if group_id not in self.consumer_groups.groups and not (
            self.coordinator.remove_empty_group(group_id)
        ):
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        result = self.consumer_groups.heartbeat(group_id, params, api_version, self.now(), topics)
        self._store_consumer_group(group_id)
        self._after_change()
        return result

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group to describe (ConsumerGroupDescribe), or None."""
        self._check(group_id)
        return self.consumer_groups.groups.get(group_id)

    def _delete_consumer_group_offsets(
        self, group: ConsumerGroup, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's OffsetDelete: offsets of topics the group subscribes to stay."""
        subscribed = group.subscribed_topics()
        results = {
            tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
            for tp in partitions
        }
        self.store.delete_offsets(
            group.group_id, [tp for tp, e in results.items() if e is ErrorCode.NONE]
        )
        self._journal_changed.set()
        return results

    def _commit_consumer_group_offsets(
        self,
        group_id: str,
        member_epoch: int,
        member_id: str,
        offsets: dict[TopicPartition, OffsetCommitItem],
        api_version: int,
    ) -> dict[TopicPartition, ErrorCode]:
        group = self.consumer_groups.groups[group_id]
        error = group.validate_offset_commit(member_id, member_epoch, api_version, False)
        if error is not ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        now_ms = wall_ms()
        limit = self.config.offset_metadata_max_bytes
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, item in offsets.items():
            metadata = item.metadata or ""
            too_large = len(metadata.encode()) > limit
            results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE if too_large else ErrorCode.NONE
            if not too_large:
                accepted[tp] = OffsetAndMetadata(item.offset, item.leader_epoch, metadata, now_ms)
        self.store.commit(group_id, accepted)
        self._journal_changed.set()
        return results

    def list_groups(
        self, states: Sequence[str] = (), types: Sequence[str] = ()
    ) -> list[GroupOverview]:
        """Classic and consumer groups (ListGroups v5 filters on the type)."""
        classic = self.coordinator.list_groups(states, types)
        shadowed = set(self.consumer_groups.groups)
        return [g for g in classic if g.group_id not in shadowed] + (
            self.consumer_groups.list_groups(states, types)
        )


def _answer_waiting_members(coordinator: GroupCoordinator, error: ErrorCode) -> None:
    """Kafka's onGroupUnloaded: members waiting in a JoinGroup or SyncGroup are told to
    find the coordinator again."""
    for group in coordinator.groups.values():
        for member in group.members.values():
            member.complete_join(JoinResult(error, member.member_id))
            member.complete_sync(SyncResult(error))


async def _answer_when_stored(
    pending: AppendRound, result: SyncResult, callback: SyncCallback
) -> None:
    error = await pending.client_error()
    callback(result if error is ErrorCode.NONE else SyncResult(error))
