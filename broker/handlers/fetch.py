"""Fetch (key 1): zero-copy reads from the log, KIP-74 budgets, long polls on events.

Responses carry the log's bytes as they are (no copy, no decode). A fetch
that finds fewer than `min_bytes` waits up to `max_wait_ms` as a `Deferred`,
woken by any involved partition's `data_appended` event (never by polling),
then reads again: Kafka's DelayedFetch (a follower's fetch, which reads up to the log
end, only once a partition's log end moved). A partition error (unknown topic,
offset out of range, ...) answers at once, as Kafka's `errorReadingData` does.

Fetch sessions (KIP-227) are answered the way a Kafka broker with no free
session slots answers them (FetchManager.newContext): a full fetch (epoch 0 or
-1) gets a sessionless full response with session id 0, and an incremental
fetch (epoch > 0) gets FETCH_SESSION_ID_NOT_FOUND, since no session exists.
Clients then keep sending full fetches.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

import attrs
import trio
import trio_util

from broker.broker_topic_stats import BrokerTopicStats
from broker.errors import KafkaError
from broker.handlers.api_handler import Deferred
from broker.handlers.auth_helper import TOPIC, authorize_cluster, authorized_names
from broker.handlers.common import check_leader_epoch, error_code_of
from broker.handlers.leader_hints import NO_HINTS, LeaderHints, with_fetch_hints
from broker.handlers.log_view import LogManagerView, PartitionView
from broker.handlers.replica_tracking import NO_REPLICATION, ReplicaTracking
from broker.net.log_limiter import LogLimiter
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FetchRequest, FetchResponse
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    PartitionData,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

log = logging.getLogger(__name__)

API_KEY = ApiKey.FETCH
TOPIC_IDS_FROM = 13
SESSIONS_FROM = 7
READ_COMMITTED = 1
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@attrs.frozen
class FetchOutcome:
    """One read pass over the requested partitions."""

    response: FetchResponse
    bytes_read: int
    has_error: bool
    wakeups: tuple[trio.Event, ...]
    bytes_by_topic: tuple[tuple[str, int], ...] = ()


class FetchHandler:
    api_key = API_KEY
    min_version = 4  # message format v2
    max_version = 17

    def __init__(
        self,
        log_manager: LogManagerView,
        stats: BrokerTopicStats | None = None,
        *,
        authorizer: Authorizer = ALLOW_ALL,
        replication: ReplicaTracking = NO_REPLICATION,
        leader_hints: LeaderHints = NO_HINTS,
    ) -> None:
        self._logs = log_manager
        self._stats = stats if stats is not None else BrokerTopicStats()
        self._authorizer = authorizer
        self._replication = replication
        self._leader_hints = leader_hints
        self._corrupt_log = LogLimiter(log, burst=5, interval_s=60.0, what="corrupt batch reports")

    async def handle(self, request: Request) -> FetchResponse | Deferred:
        body: FetchRequest = request.body
        version = request.api_version
        if version >= SESSIONS_FROM and body.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
            return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
        deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
        denied = self._unreadable_topics(request, body, version)
        outcome = await self._read(request, body, version, denied)
        if self._complete(body, outcome):
            return self._answer(request, outcome)

        async def wait() -> FetchResponse:
            return self._answer(
                request, await self._long_poll(request, body, version, outcome, deadline, denied)
            )

        async def early() -> FetchResponse:
            return self._answer(request, await self._read(request, body, version, denied))

        return Deferred(wait, early)

    def _answer(self, request: Request, outcome: FetchOutcome) -> FetchResponse:
        """The response that leaves, counted once (a long poll may read several times),
        with KIP-951's leader hints where a partition is led elsewhere."""
        for topic, size in outcome.bytes_by_topic:
            self._stats.record_fetched(topic, size)
        if not outcome.has_error:
            return outcome.response
        return with_fetch_hints(
            outcome.response,
            request.api_version,
            request.context.listener_name,
            self._leader_hints,
            self._topic_name_of,
        )

    def _topic_name_of(self, topic_id: uuid.UUID) -> str | None:
        topic = self._logs.topic_by_id(topic_id)
        return None if topic is None else topic.name

    def _complete(self, body: FetchRequest, outcome: FetchOutcome) -> bool:
        """KafkaApis/ReplicaManager.fetchMessages: answer now unless waiting could help."""
        return (
            body.max_wait_ms <= 0
            or not body.topics
            or outcome.bytes_read >= body.min_bytes
            or outcome.has_error
            or not outcome.wakeups
        )

    def _unreadable_topics(
        self, request: Request, body: FetchRequest, version: int
    ) -> frozenset[str]:
        """KafkaApis.handleFetchRequest: a consumer needs READ on each topic; the others
        answer TOPIC_AUTHORIZATION_FAILED and take no part in the long poll. A follower
        (replica id set) needs CLUSTER_ACTION on the cluster instead, or every topic is
        refused: its fetches move the high watermark and the ISR, which only brokers may."""
        if not self._authorizer.enabled:
            return frozenset()
        names = {self._topic_name(t, version)[0] for t in body.topics} - {""}
        replica_id = body.replica_id if version < 15 else body.replica_state.replica_id
        if replica_id >= 0:
            allowed = authorize_cluster(self._authorizer, request, AclOperation.CLUSTER_ACTION)
            return frozenset() if allowed else frozenset(names)
        readable = authorized_names(self._authorizer, request, AclOperation.READ, TOPIC, names)
        return frozenset(names - readable)

    async def _read(
        self, request: Request, body: FetchRequest, version: int, denied: frozenset[str]
    ) -> FetchOutcome:
        """One read within what the response budget grants (broker/net/response_memory.py):
        a response waits in memory until its client reads it, and clients that never
        read must not make the broker's memory grow with every large fetch."""
        granted = request.reserve_response_memory(max(body.max_bytes, 0))
        outcome = await self.read_once(body, version, denied, max_bytes=granted)
        request.keep_response_memory(outcome.bytes_read)
        return outcome

    async def _long_poll(
        self,
        request: Request,
        body: FetchRequest,
        version: int,
        outcome: FetchOutcome,
        deadline: float,
        denied: frozenset[str] = frozenset(),
    ) -> FetchOutcome:
        while trio.current_time() < deadline:
            with trio.move_on_at(deadline):
                await wait_any(outcome.wakeups)
            unchanged = self._follower_has_nothing_new(body, version, denied)
            if unchanged is not None and trio.current_time() < deadline:
                outcome = attrs.evolve(outcome, wakeups=unchanged)
                continue
            outcome = await self._read(request, body, version, denied)
            if self._complete(body, outcome):
                break
        return outcome

    def _follower_has_nothing_new(
        self, body: FetchRequest, version: int, denied: frozenset[str]
    ) -> tuple[trio.Event, ...] | None:
        """For a follower's fetch woken without its partitions' log ends moving (the
        high watermark rose, as every acks=all batch makes it do): the events to wait on
        again, without reading (Kafka's DelayedFetch checks the follower's bytes against
        the log end the same way). None for a consumer, or when a read could answer
        something: new records, a leader epoch or partition that changed."""
        replica_id = body.replica_id if version < 15 else body.replica_state.replica_id
        if replica_id < 0:
            return None
        events = []
        for fetch_topic in body.topics:
            name, _ = self._topic_name(fetch_topic, version)
            if not name or name in denied:
                return None
            for wanted in fetch_topic.partitions:
                partition = self._logs.partition(name, wanted.partition)
                if (
                    partition is None
                    or wanted.current_leader_epoch not in (-1, partition.leader_epoch)
                    or partition.log_end_offset != wanted.fetch_offset
                ):
                    return None
                events.append(partition.data_appended())
        return tuple(events)

    async def read_once(
        self,
        body: FetchRequest,
        version: int,
        denied: frozenset[str] = frozenset(),
        max_bytes: int | None = None,
    ) -> FetchOutcome:
        """Read every requested partition within the request's byte budget (KIP-74), or
        within `max_bytes` when smaller (what the response budget granted)."""
        remaining = max(body.max_bytes, 0) if max_bytes is None else max_bytes
        min_one_batch = True
        bytes_read = 0
        has_error = False
        wakeups: list[trio.Event] = []
        topics = []
        read_committed = body.isolation_level == READ_COMMITTED
        replica_id = body.replica_id if version < 15 else body.replica_state.replica_id
        bytes_by_topic: list[tuple[str, int]] = []
        for fetch_topic in body.topics:
            name, missing_code = self._topic_name(fetch_topic, version)
            partitions = []
            topic_bytes = 0
            for wanted in fetch_topic.partitions:
                if name in denied:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    partitions.append(error_partition(wanted.partition, code))
                    continue
                partition = self._logs.partition(name, wanted.partition) if name else None
                if partition is None:
                    has_error = True
                    partitions.append(error_partition(wanted.partition, missing_code))
                    continue
                wakeups.append(partition.data_appended())
                limit = min(max(wanted.partition_max_bytes, 0), remaining)
                min_one = min_one_batch
                try:
                    if replica_id >= 0:  # a follower: its offset moves the high watermark
                        # ... only at the current leader epoch (Kafka checks it first): a
                        # follower the controller took out of the ISR at the next epoch
                        # must not be taken back in by a fetch it sent before it knew.
                        check_leader_epoch(wanted.current_leader_epoch, partition.leader_epoch)
                        code = self._replication.on_follower_fetch(
                            name, wanted.partition, replica_id, wanted.fetch_offset
                        )
                        if code != ErrorCode.NONE:
                            raise KafkaError(code, f"replica {replica_id} of {name}")
                        if self._replication.throttle_replica_fetch(
                            name, wanted.partition, replica_id
                        ):  # left out while over the reassignment throttle, not delayed
                            limit, min_one = 0, False
                    data = await read_partition(
                        partition, wanted, limit, min_one, read_committed, replica_id >= 0
                    )
                except KafkaError as exc:
                    has_error = True
                    answered = error_code_of(exc)
                    if exc.error_code == ErrorCode.CORRUPT_MESSAGE:
                        answered = self._report_corrupt(name, wanted.partition, exc)
                    partitions.append(error_partition(wanted.partition, answered))
                    continue
                size = record_bytes(data.records)
                if replica_id >= 0:
                    self._replication.replica_bytes_sent(name, wanted.partition, size)
                if size:
                    min_one_batch = False
                    remaining = max(remaining - size, 0)
                    bytes_read += size
                    topic_bytes += size
                partitions.append(data)
            if topic_bytes:
                bytes_by_topic.append((name, topic_bytes))
            topics.append(
                FetchableTopicResponse(
                    topic=name if version < TOPIC_IDS_FROM else "",
                    topic_id=fetch_topic.topic_id,
                    partitions=tuple(partitions),
                )
            )
        return FetchOutcome(
            FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=tuple(topics)),
            bytes_read,
            has_error,
            tuple(wakeups),
            tuple(bytes_by_topic),
        )

    def _report_corrupt(self, topic: str, partition: int, error: KafkaError) -> int:
        """Counted, and the code to answer: NOT_LEADER_OR_FOLLOWER while an in-sync
        replica takes over to repair it (replication logs that once), else
        CORRUPT_MESSAGE, logged rate-limited: each consumer retries the same offset
        until an operator moves it past (docs/corrupt-data.md)."""
        self._stats.record_corrupt_fetch(topic)
        code = self._replication.corrupt_read(topic, partition)
        if code == ErrorCode.CORRUPT_MESSAGE:
            self._corrupt_log.log(
                logging.ERROR, "Fetch answered CORRUPT_MESSAGE: %s", error.message
            )
        return code

    def _topic_name(self, fetch_topic: FetchTopic, version: int) -> tuple[str, int]:
        """The topic's name ("" if unknown) and the code for an unknown topic."""
        if version < TOPIC_IDS_FROM:
            return fetch_topic.topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        topic = self._logs.topic_by_id(fetch_topic.topic_id)
        return (topic.name if topic else ""), ErrorCode.UNKNOWN_TOPIC_ID

    def error_response(self, request: Request, error_code: int) -> FetchResponse:
        body: FetchRequest = request.body
        return FetchResponse(
            error_code=error_code,
            session_id=0,
            responses=tuple(
                FetchableTopicResponse(
                    topic=t.topic,
                    topic_id=t.topic_id,
                    partitions=tuple(
                        error_partition(p.partition, error_code) for p in t.partitions
                    ),
                )
                for t in body.topics
            ),
        )


async def read_partition(
    partition: PartitionView,
    wanted: FetchPartition,
    limit: int,
    min_one_batch: bool,
    read_committed: bool,
    follower: bool = False,
) -> PartitionData:
    check_leader_epoch(wanted.current_leader_epoch, partition.leader_epoch)
    if wanted.fetch_offset < 0:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"negative offset {wanted.fetch_offset}")
    if read_committed:
        result = await partition.read(
            wanted.fetch_offset, limit, min_one_batch=min_one_batch, read_committed=True
        )
        aborted = tuple(
            AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in result.aborted_transactions or ()
        )
    else:
        result = await partition.read(
            wanted.fetch_offset, limit, min_one_batch=min_one_batch, follower=follower
        )
    return PartitionData(
        partition_index=wanted.partition,
        error_code=ErrorCode.NONE,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        # Kafka sends null unless read_committed.
        aborted_transactions=aborted if read_committed else None,
        preferred_read_replica=-1,
        records=result.records,
    )


def error_partition(index: int, error_code: int) -> PartitionData:
    """Kafka's FetchResponse.partitionResponse(error): offsets unknown, no records."""
    return PartitionData(
        partition_index=index,
        error_code=error_code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        records=b"",
    )


def record_bytes(records: bytes | memoryview | None) -> int:
    if records is None:
        return 0
    return records.nbytes if isinstance(records, memoryview) else len(records)


async def wait_any(events: Sequence[trio.Event]) -> None:
    """Return as soon as one of `events` is set."""
    if not events:
        await trio.sleep_forever()
    distinct = list(dict.fromkeys(events))
    if len(distinct) == 1:
        # One partition's (a follower's usual fetch, woken once per replicated batch):
        # no nursery and task per wait.
        await distinct[0].wait()
        return
    await trio_util.wait_any(*(event.wait for event in distinct))
