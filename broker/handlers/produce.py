"""Produce (key 0): validate each partition's batch as Kafka's broker does, then append.

The order of checks follows KafkaApis.handleProduceRequest and
ReplicaManager.appendRecords: unknown topic/partition first, then the request's
acks, then the records themselves (ProduceRequest.validateRecords,
UnifiedLog.analyzeAndValidateRecords, LogValidator), then the append (where the
log checks the idempotent producer's sequence). Every partition gets its own
error code; one bad partition never stops the others. Produce never creates
topics (Kafka stopped doing that on the produce path; Metadata does it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio

from broker.broker_topic_stats import BrokerTopicStats
from broker.errors import KafkaError
from broker.handlers.api_handler import CloseConnection, NoResponse
from broker.handlers.auth_helper import TOPIC, TRANSACTIONAL_ID, authorize, authorized_names
from broker.handlers.common import error_code_of, error_message_of
from broker.handlers.log_view import LogManagerView, PartitionView, TopicView
from broker.net.request import Request
from broker.protocol import records as rec
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ProduceRequest, ProduceResponse
from broker.protocol.messages.produce_request import PartitionProduceData
from broker.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

log = logging.getLogger(__name__)

API_KEY = ApiKey.PRODUCE
TransactionVerifier = Callable[[str | None, int, int, tuple[str, int]], Awaitable[int]]
"""(transactional id, producer id, epoch, partition) -> the error code for the batch."""
VALID_ACKS = (-1, 0, 1)
LONG_MAX = 2**63 - 1
# Records validated in a worker thread from this batch size on: about 2 ms of the
# event loop (validate_records walks a record in about 0.5 us).
DEEP_VALIDATION_IN_THREAD_FROM = 4000


def has_transactional_records(body: ProduceRequest) -> bool:
    """Whether any partition's batch is marked transactional (Kafka's
    RequestUtils.hasTransactionalRecords); records too broken to say are refused later,
    each with its partition's own error."""
    for topic in body.topic_data:
        for data in topic.partition_data:
            try:
                header = rec.read_batch_header(data.records or b"", verify_crc=False)
            except rec.InvalidRecordsError:
                continue
            if header.is_transactional:
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
    ) -> None:
        self._logs = log_manager
        self._stats = stats if stats is not None else BrokerTopicStats()
        self._authorizer = authorizer
        # None without a transaction coordinator (KIP-890: the topology's verifier).
        self.transaction_verifier = transaction_verifier

    async def _verify_transaction(
        self, transactional_id: str | None, header: rec.RecordBatchHeader, topic: str, index: int
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

    async def _verify_ahead(self, body: ProduceRequest, writable: set[str]) -> None:
        """Asks about every transactional partition of the request at once, so that where
        each question is a round trip to another process (broker/cluster/txn_verification.py)
        the partitions do not wait in turn; the appends that follow find the answers kept
        (a refusal is asked again there and reported with its partition)."""
        verifier = self.transaction_verifier
        if verifier is None:
            return
        questions = []
        for topic in body.topic_data:
            if topic.name not in writable:
                continue
            for data in topic.partition_data:
                try:
                    header = rec.read_batch_header(data.records or b"", verify_crc=False)
                except rec.InvalidRecordsError:
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

    async def handle(self, request: Request) -> ProduceResponse | NoResponse | CloseConnection:
        body: ProduceRequest = request.body
        if has_transactional_records(body) and (
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
            await self._verify_ahead(body, writable)
        topics = []
        for topic_data in body.topic_data:
            if topic_data.name not in writable:
                partitions = [
                    partition_error(p.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in topic_data.partition_data
                ]
            else:
                partitions = [
                    await self._produce_partition(
                        request.api_version, body.acks, body.transactional_id, topic_data.name, p
                    )
                    for p in topic_data.partition_data
                ]
            topics.append(
                TopicProduceResponse(name=topic_data.name, partition_responses=tuple(partitions))
            )
        response = ProduceResponse(responses=tuple(topics))
        if body.acks == 0:
            return acks_zero_outcome(response)
        return response

    async def _produce_partition(
        self,
        api_version: int,
        acks: int,
        transactional_id: str | None,
        topic_name: str,
        data: PartitionProduceData,
    ) -> PartitionProduceResponse:
        topic = self._logs.topic(topic_name)
        partition = self._logs.partition(topic_name, data.index) if topic else None
        if topic is None or partition is None:
            return partition_error(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if acks not in VALID_ACKS:
            return partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
        try:
            return await self._append(api_version, acks, transactional_id, topic, partition, data)
        except (KafkaError, rec.InvalidRecordsError) as exc:
            log.debug("produce to %s-%d refused: %s", topic_name, data.index, exc)
            return partition_error(data.index, error_code_of(exc), error_message_of(exc))

    async def _append(
        self,
        api_version: int,
        acks: int,
        transactional_id: str | None,
        topic: TopicView,
        partition: PartitionView,
        data: PartitionProduceData,
    ) -> PartitionProduceResponse:
        if topic.is_internal:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic.name}"
            )
        batch = data.records if data.records is not None else b""
        header = await validate_batch(batch, api_version, int(topic.config("max.message.bytes")))
        check_batch_fits_segment(header, int(topic.config("segment.bytes")))
        if header.is_transactional:
            await self._verify_transaction(transactional_id, header, topic.name, data.index)
        if acks == -1 and int(topic.config("min.insync.replicas")) > 1:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                "the in-sync replicas (1) are fewer than min.insync.replicas",
            )
        log_append_time = topic.config("message.timestamp.type") == "LogAppendTime"
        if not log_append_time:
            bad = late_or_early_record(
                batch,
                header,
                now_ms=time.time_ns() // 1_000_000,
                before_max_ms=int(topic.config("message.timestamp.before.max.ms")),
                after_max_ms=int(topic.config("message.timestamp.after.max.ms")),
            )
            if bad is not None:
                index, message = bad
                return record_error(data.index, ErrorCode.INVALID_TIMESTAMP, index, message)
        if "compact" in topic.config("cleanup.policy"):
            keyless = await keyless_record(batch, header)
            if keyless is not None:
                message = (
                    "Compacted topic cannot accept message without key in topic partition "
                    f"{topic.name}-{data.index}."
                )
                return record_error(data.index, ErrorCode.INVALID_RECORD, keyless, message)
        result = await partition.append(batch, header, log_append_time=log_append_time)
        self._stats.record_produced(topic.name, len(batch), header.record_count)
        return PartitionProduceResponse(
            index=data.index,
            error_code=ErrorCode.NONE,
            base_offset=result.base_offset,
            log_append_time_ms=result.log_append_time_ms,
            log_start_offset=result.log_start_offset,
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


async def validate_batch(
    batch: bytes | bytearray | memoryview, api_version: int, max_batch_size: int
) -> rec.RecordBatchHeader:
    """Framing and CRC first (cheap), then every record, as LogValidator does, so that
    nothing a consumer cannot parse reaches the log. Records are walked, not decoded
    (the log stores the client's bytes); large batches are walked in a worker thread so
    that one producer does not stall every other connection for milliseconds."""
    header = rec.validate_record_set(batch, api_version=api_version, max_batch_size=max_batch_size)[
        0
    ]
    whole = memoryview(batch)[: header.size_in_bytes]
    if header.record_count >= DEEP_VALIDATION_IN_THREAD_FROM:
        await trio.to_thread.run_sync(rec.validate_records, whole, header)
    else:
        rec.validate_records(whole, header)
    return header


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


async def keyless_record(
    batch: bytes | bytearray | memoryview, header: rec.RecordBatchHeader
) -> int | None:
    """Index of the first record without a key (LogValidator.validateKey: a compacted
    topic keeps records by key, so a keyless one could never be cleaned), or None."""

    def find() -> int | None:
        records = rec.decode_records(memoryview(batch)[: header.size_in_bytes], header)
        return next((i for i, record in enumerate(records) if record.key is None), None)

    if header.record_count >= DEEP_VALIDATION_IN_THREAD_FROM:
        return await trio.to_thread.run_sync(find)
    return find()


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


def check_batch_fits_segment(header: rec.RecordBatchHeader, segment_bytes: int) -> None:
    """UnifiedLog.append: a batch larger than a whole segment can never be stored."""
    if header.size_in_bytes > segment_bytes:
        raise KafkaError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"the record batch is {header.size_in_bytes} bytes, larger than the segment "
            f"size {segment_bytes}",
        )


def late_or_early_record(
    batch: bytes | bytearray | memoryview,
    header: rec.RecordBatchHeader,
    *,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
) -> tuple[int, str] | None:
    """LogValidator.validateTimestamp for CreateTime topics (KIP-937): the first record
    whose timestamp is too far in the past or future, as (index, message).

    Records are decoded only when a limit is configured (the defaults, Long.MAX,
    accept everything); the batch's base timestamp is not its minimum, since a
    producer may give later records earlier timestamps (negative deltas).
    """
    if before_max_ms >= LONG_MAX and after_max_ms >= LONG_MAX:
        return None
    low, high = now_ms - before_max_ms, now_ms + after_max_ms
    decoded = rec.decode_records(memoryview(batch)[: header.size_in_bytes], header)
    for index, record in enumerate(decoded):
        timestamp = header.base_timestamp + record.timestamp_delta
        if timestamp < low:
            return index, (
                f"timestamp {timestamp} of message with offset {index} is before the allowed "
                f"range (message.timestamp.before.max.ms={before_max_ms})"
            )
        if timestamp > high:
            return index, (
                f"timestamp {timestamp} of message with offset {index} is after the allowed "
                f"range (message.timestamp.after.max.ms={after_max_ms})"
            )
    return None
