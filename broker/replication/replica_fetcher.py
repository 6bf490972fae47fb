"""The replica fetcher: one Trio task per leader broker (Kafka's ReplicaFetcherThread).

Each round polls every partition's fetch state machine (fetcher_partition_state),
sends one OffsetsForLeaderEpoch for the partitions still finding where their log
diverged, one ListOffsets for those out of range and one Fetch for the rest, feeds
each answer back into the machine and carries out its actions on the follower's log.
A request that fails as a whole (the leader unreachable, the connection lost) backs
every partition in it off for replica.fetch.backoff.ms. With nothing to send the
task sleeps until the earliest back-off ends (trio.sleep_until, on trio's clock, so
tests run it on the mock clock) or a partition is added; the leader's long poll
(replica.fetch.wait.max.ms) paces it otherwise.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Mapping
from typing import TypeVar

import attrs
import trio

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import InvalidRecordsError
from broker.replication.fetched_records import FetchedBatches, fetched_batches
from broker.replication.fetcher_partition_state import (
    Action,
    AppendAsFollower,
    EpochEndOffsetAnswered,
    Event,
    FetchAnswered,
    FetcherSettings,
    FetchPhase,
    LeaderOffsetsAnswered,
    LocalLog,
    PartitionFetchState,
    Poll,
    RemovePartition,
    SendFetch,
    SendListOffsets,
    SendOffsetsForLeaderEpoch,
    Truncate,
    TruncateFullyAndStartAt,
    UpdateHighWatermark,
    on_event,
)
from broker.replication.follower_log import FollowerLog
from broker.replication.leader_epoch_cache import UNDEFINED_EPOCH_END_OFFSET
from broker.replication.leader_fetch_session import (
    FetchedPartition,
    FetchLimits,
    LeaderFetchSession,
)
from broker.replication.replication_quota import ReplicationQuotaManager, unthrottled
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

A = TypeVar("A")

# A request that failed as a whole: what each of its partitions is told.
SESSION_FAILURES = (OSError, ConnectionError, trio.BrokenResourceError, KafkaError)


@attrs.frozen
class ReplicaFetcherSettings:
    replica_fetch_backoff_ms: int = 1000
    limits: FetchLimits = attrs.field(factory=FetchLimits)


@attrs.define
class _Partition:
    log: FollowerLog
    state: PartitionFetchState


@attrs.define
class _Round:
    """The requests one poll of every partition asks for."""

    epochs: dict[TopicPartition, SendOffsetsForLeaderEpoch] = attrs.field(factory=dict)
    fetches: dict[TopicPartition, SendFetch] = attrs.field(factory=dict)
    list_offsets: dict[TopicPartition, SendListOffsets] = attrs.field(factory=dict)

    def empty(self) -> bool:
        return not (self.epochs or self.fetches or self.list_offsets)


class ReplicaFetcher:
    def __init__(
        self,
        leader_id: int,
        session: LeaderFetchSession,
        settings: ReplicaFetcherSettings = ReplicaFetcherSettings(),
        quota: ReplicationQuotaManager | None = None,
    ) -> None:
        self.leader_id = leader_id
        # The follower's reassignment throttle (replication_quota.py), shared by every
        # fetcher of this broker; partitions caught up with the leader's high watermark
        # at their last answer are in sync and never held back by it.
        self._quota = quota if quota is not None else unthrottled()
        self._in_sync: set[TopicPartition] = set()
        self._session = session
        self._settings = settings
        self._machine_settings = FetcherSettings(settings.replica_fetch_backoff_ms)
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._added = trio.Event()
        # The Fetch in flight: a partition added meanwhile interrupts its long poll
        # (replica.fetch.wait.max.ms), so a new leadership is followed at once.
        self._fetch_scope: trio.CancelScope | None = None
        # Partitions the leader fenced (an older epoch than its own): they wait for the
        # controller's next LeaderAndIsr, which the caller passes to add_partition.
        self.fenced: set[TopicPartition] = set()
        # Partitions whose log refused what the leader sent (a corrupt batch, a storage
        # error): set aside, as Kafka's fetcher marks a partition failed, so that the
        # others go on; a later add_partition (the next LeaderAndIsr) tries again.
        self.failed: set[TopicPartition] = set()

    @property
    def partitions(self) -> Mapping[TopicPartition, PartitionFetchState]:
        return {tp: p.state for tp, p in self._partitions.items()}

    def add_partition(self, tp: TopicPartition, log: FollowerLog, leader_epoch: int) -> None:
        """Follow the leader at `leader_epoch` (LeaderAndIsr said so): truncate first."""
        state = PartitionFetchState.start_following(
            self.leader_id, leader_epoch, log.log_end_offset
        )
        self._partitions[tp] = _Partition(log, state)
        self.fenced.discard(tp)
        self.failed.discard(tp)
        self._added.set()
        if self._fetch_scope is not None:
            self._fetch_scope.cancel()

    def wake(self) -> None:
        """Ask again now if asleep (a throttle lifted: the partitions it held back)."""
        self._added.set()

    def remove_partition(self, tp: TopicPartition) -> None:
        """This broker leads it now, or no longer hosts it; an answer in flight is dropped."""
        self._partitions.pop(tp, None)
        self._in_sync.discard(tp)
        self.fenced.discard(tp)
        self.failed.discard(tp)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self.run_once()

    async def run_once(self) -> None:
        """One round: poll, send, apply; or sleep until something can be sent."""
        requests = _Round()
        now = trio.current_time()
        for tp in list(self._partitions):
            await self._feed(tp, Poll(), now, requests)
        if requests.empty():
            await self._wait_for_work()
            return
        if requests.epochs or requests.list_offsets:
            # Those partitions fetch next round, together with the others: a Fetch sent
            # now would hold them back for a whole long poll (replica.fetch.wait.max.ms).
            if requests.epochs:
                await self._send_offsets_for_leader_epoch(requests.epochs)
            if requests.list_offsets:
                await self._send_list_offsets(requests.list_offsets)
            return
        fetches = {
            tp: request
            for tp, request in requests.fetches.items()
            if not self._quota.should_throttle(tp, tp in self._in_sync, now)
        }
        if fetches:
            await self._send_fetch(fetches)
        else:  # only throttled partitions: ask again once the rate is within the bound
            await self._wait_for_work(now + max(self._quota.throttle_time(now), 0.01))

    async def _wait_for_work(self, until: float = math.inf) -> None:
        self._added = trio.Event()
        wake_at = min(
            (p.state.delayed_until for p in self._partitions.values() if p.state.delayed_until),
            default=until,
        )
        with trio.move_on_at(min(wake_at, until)):
            await self._added.wait()

    # -- requests --
    async def _send_offsets_for_leader_epoch(
        self, requests: dict[TopicPartition, SendOffsetsForLeaderEpoch]
    ) -> None:
        answers = await self._answers(
            "OffsetsForLeaderEpoch", self._session.offsets_for_leader_epoch(requests)
        )
        now = trio.current_time()
        for tp, request in requests.items():
            answer = answers.get(tp)
            if answer is None:
                event = EpochEndOffsetAnswered(
                    request.current_leader_epoch,
                    ErrorCode.NETWORK_EXCEPTION,
                    UNDEFINED_EPOCH_END_OFFSET,
                )
            else:
                event = EpochEndOffsetAnswered(
                    request.current_leader_epoch, answer.error, answer.end
                )
            await self._feed(tp, event, now)

    async def _send_list_offsets(self, requests: dict[TopicPartition, SendListOffsets]) -> None:
        answers = await self._answers("ListOffsets", self._session.list_offsets(requests))
        now = trio.current_time()
        for tp, request in requests.items():
            answer = answers.get(tp)
            partition = self._partitions.get(tp)
            if partition is None:
                continue
            if answer is None or answer.error is not ErrorCode.NONE:
                # The machine waits for these offsets; ask again after the back-off,
                # finding the divergence point first as after any leader change.
                if partition.state.current_leader_epoch == request.current_leader_epoch:
                    partition.state = attrs.evolve(
                        partition.state,
                        phase=FetchPhase.TRUNCATING,
                        delayed_until=now + self._settings.replica_fetch_backoff_ms / 1000,
                    )
                continue
            event = LeaderOffsetsAnswered(
                request.current_leader_epoch, answer.log_start_offset, answer.log_end_offset
            )
            await self._feed(tp, event, now)

    async def _send_fetch(self, requests: dict[TopicPartition, SendFetch]) -> None:
        """Interrupted by `add_partition`: the partitions asked for stay as they were and
        are asked for again in the next round (the session drops the connection whose
        answer it will not read)."""
        limits = self._settings.limits
        # A partition retrying a leader not ready yet is asked again when its short
        # back-off ends, not after a whole long poll: the leader answers by then.
        retry_at = min(
            (
                p.state.delayed_until
                for tp, p in self._partitions.items()
                if tp not in requests and p.state.delayed_until and p.state.retrying_soon
            ),
            default=math.inf,
        )
        if retry_at < math.inf:
            wait_ms = max(0, math.ceil((retry_at - trio.current_time()) * 1000))
            limits = attrs.evolve(limits, max_wait_ms=min(limits.max_wait_ms, wait_ms))
        answers: Mapping[TopicPartition, FetchedPartition] | None = None
        with trio.CancelScope() as self._fetch_scope:
            answers = await self._answers("Fetch", self._session.fetch(requests, limits))
        self._fetch_scope = None
        if answers is None:
            return
        now = trio.current_time()
        for tp, request in requests.items():
            answer = answers.get(tp)
            epoch = request.current_leader_epoch
            if answer is None:
                await self._feed(tp, FetchAnswered(epoch, ErrorCode.NETWORK_EXCEPTION), now)
                continue
            try:
                batches = fetched_batches(answer.records)
            except InvalidRecordsError as exc:
                log.warning(
                    "fetch of %s from broker %d: corrupt records: %s", tp, self.leader_id, exc
                )
                await self._feed(tp, FetchAnswered(epoch, ErrorCode.CORRUPT_MESSAGE), now)
                continue
            event = FetchAnswered(
                epoch,
                answer.error,
                answer.high_watermark,
                batches.end_offset,
                answer.diverging_epoch,
            )
            await self._feed(tp, event, now, batches=batches)
            self._note_progress(tp, answer, now)

    def _note_progress(self, tp: TopicPartition, answer: FetchedPartition, now: float) -> None:
        """Count a throttled partition's bytes against the quota (Kafka's fetcher records
        them once appended) and whether it caught up with the leader's high watermark."""
        partition = self._partitions.get(tp)
        if partition is None or answer.error is not ErrorCode.NONE:
            return
        if self._quota.is_throttled(tp):
            self._quota.record(len(answer.records or b""), now)
        if partition.log.log_end_offset >= answer.high_watermark:
            self._in_sync.add(tp)
        else:
            self._in_sync.discard(tp)

    # -- the machine --
    async def _feed(
        self,
        tp: TopicPartition,
        event: Event,
        now: float,
        requests: _Round | None = None,
        *,
        batches: FetchedBatches | None = None,
    ) -> None:
        partition = self._partitions.get(tp)
        if partition is None:
            return  # removed while its request was in flight
        local = LocalLog(
            partition.log.log_start_offset,
            partition.log.log_end_offset,
            partition.log.high_watermark,
            partition.log.epoch_cache,
        )
        transition = on_event(partition.state, event, local, now, self._machine_settings)
        if transition.state is None:
            self._partitions.pop(tp, None)
        else:
            partition.state = transition.state
        try:
            for action in transition.actions:
                await self._carry_out(tp, partition, action, requests, batches)
        except KafkaError as exc:
            log.error(
                "stopped fetching %s from broker %d: its log refused the leader's batches (set "
                "aside until the next leader change, counted in FailedPartitionsCount): %s",
                tp,
                self.leader_id,
                exc,
            )
            self._partitions.pop(tp, None)
            self.failed.add(tp)

    async def _carry_out(
        self,
        tp: TopicPartition,
        partition: _Partition,
        action: Action,
        requests: _Round | None,
        batches: FetchedBatches | None,
    ) -> None:
        if isinstance(action, SendOffsetsForLeaderEpoch):
            assert requests is not None, "only a poll sends"
            requests.epochs[tp] = action
        elif isinstance(action, SendFetch):
            assert requests is not None, "only a poll sends"
            requests.fetches[tp] = action
        elif isinstance(action, SendListOffsets):
            # Sent in the same round as the Fetch that met OFFSET_OUT_OF_RANGE.
            await self._send_list_offsets({tp: action})
        elif isinstance(action, Truncate):
            await partition.log.truncate_to(action.offset)
        elif isinstance(action, TruncateFullyAndStartAt):
            await partition.log.truncate_fully_and_start_at(action.offset)
        elif isinstance(action, AppendAsFollower):
            assert batches is not None, "an append follows a fetch answer"
            await partition.log.append_as_follower(batches)
        elif isinstance(action, UpdateHighWatermark):
            partition.log.update_high_watermark(action.high_watermark)
        elif isinstance(action, RemovePartition):
            log.info(
                "stopped fetching %s from broker %d: %s", tp, self.leader_id, action.reason.name
            )
            self.fenced.add(tp)

    async def _answers(
        self, what: str, request: Awaitable[Mapping[TopicPartition, A]]
    ) -> Mapping[TopicPartition, A]:
        """The request's answers; none when it failed as a whole (each partition of it
        then backs off)."""
        try:
            return await request
        except SESSION_FAILURES as exc:
            log.warning(
                "%s to broker %d failed, backing off %d ms: %s",
                what,
                self.leader_id,
                self._settings.replica_fetch_backoff_ms,
                exc,
            )
            return {}
