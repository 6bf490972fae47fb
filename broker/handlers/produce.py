"""Produce (key 0): the API-level checks of each partition's batch, then the log's append.

The order of checks follows KafkaApis.handleProduceRequest and
ReplicaManager.appendRecords: unknown topic/partition first, then the request's
acks, then the records' framing (ProduceRequest.validateRecords: each partition's
header read once here), then the log's append, which runs Kafka's LogValidator once
per batch (UnifiedLog.analyzeAndValidateRecords, LogValidator) and calls back into
this handler for what needs the request (KIP-890's verification, acks=all against
min.insync.replicas) before the record checks, then checks the idempotent
producer's sequence. Every partition gets its own error code; one bad partition
never stops the others. Produce never creates topics (Kafka stopped doing that on
the produce path; Metadata does it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import NamedTuple

import trio

from broker.broker_topic_stats import BrokerTopicStats
from broker.errors import KafkaError
from broker.handlers.api_handler import CloseConnection, Deferred, NoResponse
from broker.handlers.auth_helper import TOPIC, TRANSACTIONAL_ID, authorize, authorized_names
from broker.handlers.common import error_code_of, error_message_of
from broker.handlers.leader_hints import NO_HINTS, LeaderHints, with_produce_hints
from broker.handlers.log_view import LogManagerView, PartitionView, TopicView
from broker.handlers.replica_tracking import NO_REPLICATION, ReplicaTracking
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ProduceRequest, ProduceResponse
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from broker.protocol.record_batch.batch_checks import check_codec, check_counts
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import RecordBatchHeader
from broker.protocol.record_batch.validator import (
    CLIENT_APPEND,
    CLIENT_APPEND_ON_LOOP,
    ClientAppend,
    check_single_batch,
    read_first_header,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

log = logging.getLogger(__name__)

API_KEY = ApiKey.PRODUCE
TransactionVerifier = Callable[[str | None, int, int, tuple[str, int]], Awaitable[int]]
"""(transactional id, producer id, epoch, partition) -> the error code for the batch."""
VALID_ACKS = (-1, 0, 1)
ACKS_ALL = -1


class ParsedHeader(NamedTuple):
    """A partition's batch header as read once for the whole request: ``header`` when
    the first batch is whole (what the transactional checks look at), ``error`` when the
    partition's records are refused before any topic setting matters."""

    header: RecordBatchHeader | None
    error: InvalidRecordsError | None


def read_headers(body: ProduceRequest, api_version: int) -> list[list[ParsedHeader]]:
    """Each partition's header, read once, in request order: the transactional checks,
    the verification and the append all use this one parse."""
    parsed: list[list[ParsedHeader]] = []
    for topic in body.topic_data:
        row: list[ParsedHeader] = []
        for data in topic.partition_data:
            batch = data.records or b""
            try:
                header = read_first_header(batch, api_version)
            except InvalidRecordsError as exc:
                row.append(ParsedHeader(None, exc))
                continue
            try:
                check_single_batch(batch, header, api_version)
            except InvalidRecordsError as exc:
                row.append(ParsedHeader(header, exc))
                continue
            row.append(ParsedHeader(header, None))
        parsed.append(row)
    return parsed


def transaction_header(parsed: ParsedHeader) -> RecordBatchHeader | None:
    """The header when it is readable enough to say whether the batch is transactional
    (Kafka's RequestUtils.hasTransactionalRecords); records too broken to say are
    refused later, each with its partition's own error."""
    if parsed.header is None:
        return None
    try:
        check_codec(parsed.header)
        check_counts(parsed.header)
    except InvalidRecordsError:
        return None
    return parsed.header


def has_transactional_records(parsed: list[list[ParsedHeader]]) -> bool:
    for row in parsed:
        for entry in row:
            if entry.header is None or not entry.header.is_transactional:
                continue
            if transaction_header(entry) is not None:
                return True
    return False


class ProduceHandler:
    api_key = API_KEY
    min_version = 3  # message format v2 only
    max_version = 11

    def __init__(
        self,
        log_manager: LogManagerView,
        stats: BrokerTopicStats | None = None,
        *,
        authorizer: Authorizer = ALLOW_ALL,
        transaction_verifier: TransactionVerifier | None = None,
        replication: ReplicaTracking = NO_REPLICATION,
        leader_hints: LeaderHints = NO_HINTS,
    ) -> None:
        self._logs = log_manager
        self._replication = replication
        self._leader_hints = leader_hints
        self._stats = stats if stats is not None else BrokerTopicStats()
        self._authorizer = authorizer
        # None without a transaction coordinator (KIP-890: the topology's verifier).
        self.transaction_verifier = transaction_verifier

    async def _verify_transaction(
        self, transactional_id: str | None, header: RecordBatchHeader, topic: str, index: int
    ) -> None:
        """A transactional batch must belong to an open transaction holding this
        partition (KIP-890's verification), else it would open a transaction in the
        log that no marker ever closes, holding the last stable offset back forever."""
        if header.producer_id < 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, "a transactional batch needs a producer id")
        if self.transaction_verifier is None:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE, "this broker has no transaction coordinator"
            )
        error = await self.transaction_verifier(
            transactional_id, header.producer_id, header.producer_epoch, (topic, index)
        )
        if error != ErrorCode.NONE:
            raise KafkaError(
                ErrorCode(error),
                f"producer {header.producer_id} epoch {header.producer_epoch} has no open "
                f"transaction holding {topic}-{index}",
            )

    async def _verify_ahead(
        self, body: ProduceRequest, parsed: list[list[ParsedHeader]], writable: set[str]
    ) -> None:
        """Asks about every transactional partition of the request at once, so that where
        each question is a round trip to another process (broker/transaction/txn_verification.py)
        the partitions do not wait in turn; the appends that follow find the answers kept
        (a refusal is asked again there and reported with its partition)."""
        verifier = self.transaction_verifier
        if verifier is None:
            return
        questions = []
        for topic, row in zip(body.topic_data, parsed, strict=True):
            if topic.name not in writable:
                continue
            for data, entry in zip(topic.partition_data, row, strict=True):
                header = transaction_header(entry)
                if header is None:
                    continue  # refused with its reason by the partition's own checks
                if header.is_transactional and header.producer_id >= 0:
                    questions.append(
                        (header.producer_id, header.producer_epoch, (topic.name, data.index))
                    )
        if len(questions) < 2:
            return
        async with trio.open_nursery() as nursery:
            for producer_id, epoch, partition in questions:
                nursery.start_soon(verifier, body.transactional_id, producer_id, epoch, partition)

    async def handle(
        self, request: Request
    ) -> ProduceResponse | NoResponse | CloseConnection | Deferred:
        body: ProduceRequest = request.body
        parsed = read_headers(body, request.api_version)
        if has_transactional_records(parsed) and (
            body.transactional_id is None
            or not authorize(
                self._authorizer,
                request,
                AclOperation.WRITE,
                TRANSACTIONAL_ID,
                body.transactional_id,
            )
        ):
            # Kafka's KafkaApis: transactional records need a transactional id the
            # principal may WRITE; without one the whole request is refused, not appended
            # as if the producer id alone made it a transaction.
            response = self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            if response is None:  # acks=0: closing is the only way to tell the client
                return CloseConnection("acks=0 produce failed: transactional id not authorized")
            return response
        writable = authorized_names(
            self._authorizer, request, AclOperation.WRITE, TOPIC, (t.name for t in body.topic_data)
        )
        if body.transactional_id is not None:
            await self._verify_ahead(body, parsed, writable)
        topics = []
        for topic_data, row in zip(body.topic_data, parsed, strict=True):
            if topic_data.name not in writable:
                partitions = [
                    partition_error(p.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in topic_data.partition_data
                ]
            else:
                partitions = [
                    await self._produce_partition(request, topic_data, p, h)
                    for p, h in zip(topic_data.partition_data, row, strict=True)
                ]
            topics.append(
                TopicProduceResponse(name=topic_data.name, partition_responses=tuple(partitions))
            )
        response = ProduceResponse(responses=tuple(topics))
        if body.acks == 0:
            return acks_zero_outcome(response)
        hinted = partial(self._hinted, request)
        if body.acks == ACKS_ALL:
            waits = self._acks_all_waits(body, parsed, response)
            if waits:
                return self._deferred_acks(response, waits, max(body.timeout_ms, 0) / 1000, hinted)
        return hinted(response)

    def _hinted(self, request: Request, response: ProduceResponse) -> ProduceResponse:
        """KIP-951's leader hints, looked up only where a partition was refused."""
        refused = any(
            answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            for topic in response.responses
            for answer in topic.partition_responses
        )
        if not refused:
            return response
        return with_produce_hints(
            response, request.api_version, request.context.listener_name, self._leader_hints
        )

    def _acks_all_waits(
        self, body: ProduceRequest, parsed: list[list[ParsedHeader]], response: ProduceResponse
    ) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the offset after its last record, for each appended
        partition whose followers this broker tracks."""
        waits = {}
        for topic, row in zip(response.responses, parsed, strict=True):
            for answer, entry in zip(topic.partition_responses, row, strict=True):
                if answer.error_code != ErrorCode.NONE or entry.header is None:
                    continue
                if self._replication.tracked(topic.name, answer.index):
                    end = answer.base_offset + entry.header.last_offset_delta + 1
                    waits[(topic.name, answer.index)] = end
        return waits

    def _deferred_acks(
        self,
        response: ProduceResponse,
        waits: dict[tuple[str, int], int],
        timeout_s: float,
        hinted: Callable[[ProduceResponse], ProduceResponse],
    ) -> Deferred:
        """Kafka's DelayedProduce: answered once every ISR member has the records, each
        partition with its own outcome (or at once, with what there is, at shutdown)."""

        async def answer(wait_s: float) -> ProduceResponse:
            codes: dict[tuple[str, int], ErrorCode] = {}

            async def one(key: tuple[str, int], required_offset: int) -> None:
                codes[key] = await self._replication.wait_for_acks(
                    key[0], key[1], required_offset, wait_s
                )

            async with trio.open_nursery() as nursery:
                for key, required_offset in waits.items():
                    nursery.start_soon(one, key, required_offset)
            return hinted(with_partition_errors(response, codes))

        return Deferred(partial(answer, timeout_s), partial(answer, 0.0))

    async def _produce_partition(
        self,
        request: Request,
        topic_data: TopicProduceData,
        data: PartitionProduceData,
        parsed: ParsedHeader,
    ) -> PartitionProduceResponse:
        acks = request.body.acks
        topic_name = topic_data.name
        topic = self._logs.topic(topic_name)
        partition = self._logs.partition(topic_name, data.index) if topic else None
        if topic is None or partition is None:
            return partition_error(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if acks not in VALID_ACKS:
            return partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
        try:
            return await self._append(request, topic, partition, data, parsed)
        except InvalidRecordsError as exc:
            log.debug("produce to %s-%d refused: %s", topic_name, data.index, exc)
            if exc.record_index is not None:
                return record_error(data.index, exc.error_code, exc.record_index, exc.message)
            return partition_error(data.index, error_code_of(exc), error_message_of(exc))
        except KafkaError as exc:
            log.debug("produce to %s-%d refused: %s", topic_name, data.index, exc)
            return partition_error(data.index, error_code_of(exc), error_message_of(exc))

    async def _append(
        self,
        request: Request,
        topic: TopicView,
        partition: PartitionView,
        data: PartitionProduceData,
        parsed: ParsedHeader,
    ) -> PartitionProduceResponse:
        if topic.is_internal:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic.name}"
            )
        batch = data.records if data.records is not None else b""
        if parsed.error is not None:
            raise parsed.error
        header = parsed.header
        assert header is not None  # read_headers gives one or the other
        acks = request.body.acks
        on_loop = request.bulk_on_loop
        client = CLIENT_APPEND_ON_LOOP if on_loop else CLIENT_APPEND
        min_insync_replicas = int(topic.config("min.insync.replicas")) if acks == -1 else 1
        if self._replication.tracked(topic.name, data.index):
            # The leader counts its ISR (one replica alone is the rule below).
            code = self._replication.check_produce(topic.name, data.index, acks)
            if code != ErrorCode.NONE:
                raise KafkaError(code, "the in-sync replicas are fewer than min.insync.replicas")
            min_insync_replicas = 1
        if header.is_transactional or min_insync_replicas > 1:
            client = ClientAppend(
                partial(
                    self._before_records,
                    request.body.transactional_id,
                    min_insync_replicas,
                    topic.name,
                    data.index,
                ),
                on_loop,
            )
        result = await partition.append(batch, header, client)
        self._replication.on_append(topic.name, data.index)
        self._stats.record_produced(topic.name, len(batch), header.record_count)
        return PartitionProduceResponse(
            index=data.index,
            error_code=ErrorCode.NONE,
            base_offset=result.base_offset,
            log_append_time_ms=result.log_append_time_ms,
            log_start_offset=result.log_start_offset,
        )

    async def _before_records(
        self,
        transactional_id: str | None,
        min_insync_replicas: int,
        topic: str,
        index: int,
        header: RecordBatchHeader,
    ) -> None:
        """The checks of a batch that need the request, which the log's append runs
        between its batch and record checks (ClientAppend.before_records)."""
        if header.is_transactional:
            await self._verify_transaction(transactional_id, header, topic, index)
        if min_insync_replicas > 1:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                "the in-sync replicas (1) are fewer than min.insync.replicas",
            )

    def error_response(self, request: Request, error_code: int) -> ProduceResponse | None:
        body: ProduceRequest = request.body
        if body.acks == 0:
            return None  # Kafka's ProduceRequest.getErrorResponse: the client reads nothing
        return ProduceResponse(
            responses=tuple(
                TopicProduceResponse(
                    name=t.name,
                    partition_responses=tuple(
                        partition_error(p.index, error_code) for p in t.partition_data
                    ),
                )
                for t in body.topic_data
            )
        )


def record_error(
    index: int, error_code: int, record_index: int, message: str
) -> PartitionProduceResponse:
    """A partition refused for one record of its batch (Kafka's RecordError)."""
    return PartitionProduceResponse(
        index=index,
        error_code=error_code,
        base_offset=-1,
        record_errors=(
            BatchIndexAndErrorMessage(batch_index=record_index, batch_index_error_message=message),
        ),
        error_message=message,
    )


def partition_error(
    index: int, error_code: int, message: str | None = None
) -> PartitionProduceResponse:
    """Kafka's PartitionResponse(error): every offset field unknown (-1)."""
    return PartitionProduceResponse(
        index=index,
        error_code=error_code,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        error_message=message,
    )


def with_partition_errors(
    response: ProduceResponse, codes: dict[tuple[str, int], ErrorCode]
) -> ProduceResponse:
    """The response with the acks=all outcome of each partition that waited."""
    return response._replace(
        responses=tuple(
            topic._replace(
                partition_responses=tuple(
                    p._replace(error_code=codes.get((topic.name, p.index), p.error_code))
                    for p in topic.partition_responses
                )
            )
            for topic in response.responses
        )
    )


def acks_zero_outcome(response: ProduceResponse) -> NoResponse | CloseConnection:
    """acks=0: the client reads no response, so the only way to report a failure is
    to close the connection (KafkaApis' produce callback does the same)."""
    failures = [
        f"{t.name}-{p.index}: {ErrorCode(p.error_code).name}"
        for t in response.responses
        for p in t.partition_responses
        if p.error_code != ErrorCode.NONE
    ]
    if failures:
        return CloseConnection("acks=0 produce failed: " + ", ".join(failures))
    return NoResponse()
