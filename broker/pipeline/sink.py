"""The sink: Spark's Kafka sink columns, written with Produce (acks=all, idempotent).

Each write task opens a connection, gets an idempotent producer id
(InitProducerId) and sends one v2 batch per partition per request with
sequence numbers counted per partition, so the broker drops a batch it
already appended when a request is retried.

Replays (exactly-once across restarts) use a commit log topic
(``_trio_kafka_sink_commits`` by default, option ``sink.commitTopic``) keyed by
the streaming query id, which Spark keeps in the checkpoint:

* a task of micro-batch B writes its last data request together with a
  *task marker* ``{query, batch: B, task: t}`` in the same Produce request;
* the driver's ``commit(messages, B)`` appends a *batch marker* ``{query, batch: B}``;
* before writing anything, a task with rows reads the commit log backwards from
  its end down to the query's batch marker of B-1 (everything about B lies after
  it) and writes nothing when the batch marker of B, or its own task marker, is
  there. What a batch reads back is what was logged since the previous batch, not
  the log's history (docs/pipeline.md gives the measured bytes).

So a batch Spark runs again after a restart (its sink commit happened, or some
of its tasks finished, before the checkpoint recorded it) does not write twice.
See docs/pipeline.md for the window this leaves open.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from broker.pipeline.kafka_client import KafkaClient, KafkaClientError
from broker.pipeline.offsets import EARLIEST, LATEST, TopicPartition
from broker.pipeline.options import DEFAULT_COMMIT_TOPIC, LEGACY_COMMIT_TOPIC, SinkOptions
from broker.pipeline.retries import on_retriable_errors
from broker.pipeline.routed_client import RoutedKafkaClient
from broker.protocol.records import Record, encode_batch, iter_batches, iter_records

log = logging.getLogger("broker.pipeline.sink")

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
# How far back a task looks in the commit log for its markers when it finds no anchor.
COMMIT_LOG_TAIL = 20_000
# The first span of the backward scan, in records: the markers written since the last
# batch marker are about one per task of the batch.
FIRST_SPAN = 8
# A Fetch for n markers asks for n * MARKER_BYTES (a marker's batch is ~150-250 bytes).
MARKER_BYTES = 256


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    task: int
    records: int
    skipped: bool
    query_id: str | None = None


class SinkSchemaError(ValueError):
    """The DataFrame written lacks a column the sink needs, or has the wrong type."""


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's Kafka sink rules: value required; topic column or option; typed columns."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SinkSchemaError("required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise SinkSchemaError(f"{name} attribute type must be a string or binary")
    if "topic" not in fields and options.topic is None:
        raise SinkSchemaError(
            "topic option required when no 'topic' attribute is present. Use the topic "
            "option for setting a topic."
        )
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise SinkSchemaError("topic attribute type must be a string")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SinkSchemaError("partition attribute type must be an int")


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (the default partitioner's hash), as a signed int32."""
    length = len(data)
    m = 0x5BD1E995
    mask = 0xFFFFFFFF
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


# ------------------------------------------------------------- commit log


def ensure_commit_topic(client: KafkaClient, topic: str) -> None:
    if not client.partitions_for([topic]):
        client.create_topic(topic, 1)


def commit_topics_to_read(client: KafkaClient, topic: str) -> list[str]:
    """The commit log, and the one used before it was renamed when that still holds markers.

    Checkpoints written by earlier versions have their markers under ``LEGACY_COMMIT_TOPIC``;
    reading it too keeps their replays from writing a batch twice.
    """
    if topic != DEFAULT_COMMIT_TOPIC or not client.partitions_for([LEGACY_COMMIT_TOPIC]):
        return [topic]
    return [topic, LEGACY_COMMIT_TOPIC]


def read_markers(
    client: KafkaClient, topic: str, query_id: str, batch_id: int
) -> tuple[list[dict[str, Any]], bool]:
    """This query's markers that can concern batch ``batch_id``, read backwards from the end.

    Spark runs a query's micro-batches one after another and the driver's batch marker of
    B-1 is written before any task of B starts, so every marker of B lies after it: the
    scan stops at that *anchor* (the second value, True when found). It reads spans of
    ``FIRST_SPAN`` records, doubling, so a batch pays for what was written since the last
    one, not for the log's history. Without an anchor (a query's first batch) it goes back
    at most ``COMMIT_LOG_TAIL`` records.
    """
    tp = (topic, 0)
    earliest = client.list_offsets({tp: EARLIEST})[tp]
    stop = client.list_offsets({tp: LATEST})[tp]
    floor = max(earliest, stop - COMMIT_LOG_TAIL)
    span = FIRST_SPAN
    markers: list[dict[str, Any]] = []
    while stop > floor:
        start = max(floor, stop - span)
        chunk = _markers_between(client, topic, query_id, start, stop)
        anchors = [
            i
            for i, m in enumerate(chunk)
            if m.get("task") is None and m.get("batch", -2) >= batch_id - 1
        ]
        if anchors:
            # Markers before the newest anchor belong to earlier batches (or to an earlier
            # checkpoint at the same path, whose batch ids started at 0 too).
            return chunk[anchors[-1] :] + markers, True
        markers = chunk + markers
        stop, span = start, span * 2
    return markers, False


def _markers_between(
    client: KafkaClient, topic: str, query_id: str, start: int, stop: int
) -> list[dict[str, Any]]:
    """The query's markers at offsets [start, stop); Fetch sized to the span, not the log."""
    key = query_id.encode()
    markers = []
    offset = start
    while offset < stop:
        max_bytes = max(MARKER_BYTES, (stop - offset) * MARKER_BYTES)
        fetched = client.fetch(topic, 0, offset, max_bytes=max_bytes, max_wait_ms=0)
        if fetched.error_code:
            raise KafkaClientError(fetched.error_code, f"read commit log {topic}")
        progressed = False
        for header, batch in iter_batches(fetched.records, allow_partial_tail=True):
            for record in iter_records(batch, header):
                if offset <= record.offset < stop and record.key == key and record.value:
                    markers.append(json.loads(record.value))
            offset = max(offset, header.last_offset + 1)
            progressed = True
        if not progressed:
            break
    return markers


def batch_already_written(
    client: KafkaClient, options: SinkOptions, query_id: str, batch_id: int, task: int
) -> bool:
    """Whether the batch marker of ``batch_id``, or this task's marker of it, is logged."""
    ensure_commit_topic(client, options.commit_topic)
    markers, anchored = read_markers(client, options.commit_topic, query_id, batch_id)
    if not anchored:
        # A query that has no marker in the commit log yet may have older ones under the
        # old name (checkpoints from before the rename).
        for older in commit_topics_to_read(client, options.commit_topic)[1:]:
            markers += read_markers(client, older, query_id, batch_id)[0]
    return any(m.get("batch") == batch_id and m.get("task") in (None, task) for m in markers)


def marker_record(query_id: str, batch_id: int, task: int | None) -> Record:
    body: dict[str, Any] = {"query": query_id, "batch": batch_id}
    if task is not None:
        body["task"] = task
    return Record(0, 0, query_id.encode(), json.dumps(body, sort_keys=True).encode())


# ----------------------------------------------------------------- writing


class _Producer:
    """Idempotent producer state of one task: per-partition sequences and buffers."""

    def __init__(self, client: KafkaClient, options: SinkOptions) -> None:
        self.client = client
        self.options = options
        self.producer_id, self.epoch = client.init_producer_id()
        self.sequences: dict[TopicPartition, int] = {}
        self.pending: dict[TopicPartition, list[Record]] = {}
        self.pending_bytes = 0
        self.partition_counts: dict[str, int] = {}
        self.written = 0

    def partitions(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is None:
            count = self.client.partitions_for([topic], auto_create=True).get(topic, 0)
            if count == 0:
                raise KafkaClientError(
                    3,
                    f"output topic {topic} does not exist and the broker does not auto-create "
                    f"topics: create it first (broker client topics create {topic})",
                )
            self.partition_counts[topic] = count
        return count

    def add(self, tp: TopicPartition, record: Record, size: int) -> None:
        records = self.pending.setdefault(tp, [])
        records.append(
            Record(len(records), 0, record.key, record.value, record.headers, record.attributes)
        )
        self.pending_bytes += size
        if self.pending_bytes >= self.options.max_request_bytes:
            self.flush()

    def flush(self, extra: dict[TopicPartition, list[Record]] | None = None) -> None:
        groups = dict(self.pending)
        for tp, records in (extra or {}).items():
            groups[tp] = [Record(i, 0, r.key, r.value, r.headers) for i, r in enumerate(records)]
        if not groups:
            return
        now = time.time_ns() // 1_000_000
        batches = {}
        for tp, records in groups.items():
            sequence = self.sequences.get(tp, 0)
            batches[tp] = encode_batch(
                records,
                base_timestamp=now,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                base_sequence=sequence,
            )
            self.sequences[tp] = sequence + len(records)
        on_retriable_errors(attempts=5, delay_s=0.2)(self.client.produce, batches, acks=-1)
        self.written += sum(len(r) for tp, r in self.pending.items())
        self.pending = {}
        self.pending_bytes = 0


def write_batches(
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    *,
    query_id: str | None = None,
    batch_id: int | None = None,
) -> SinkCommitMessage:
    """One task's rows to the broker; with a query and batch id, at most once per batch.

    A task without rows connects to nothing (an aggregate's shuffle leaves many empty).
    """
    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    first = next((rb for rb in batches if rb.num_rows), None)
    if first is None:
        return SinkCommitMessage(task, 0, False, query_id)
    with RoutedKafkaClient.connect(
        options.bootstrap_servers, client_id="trio-kafka-sink", security=options.security
    ) as client:
        rows = itertools.chain([first], batches)
        return write_task(client, options, rows, task, query_id=query_id, batch_id=batch_id)


def write_task(
    client: KafkaClient,
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    task: int,
    *,
    query_id: str | None = None,
    batch_id: int | None = None,
) -> SinkCommitMessage:
    """``write_batches`` over a connected client (tests count what it reads and writes)."""
    marker = None
    if query_id is not None and batch_id is not None:
        if batch_already_written(client, options, query_id, batch_id, task):
            log.info("batch %s task %s of query %s already written", batch_id, task, query_id)
            for _ in batches:
                pass
            return SinkCommitMessage(task, 0, True, query_id)
        marker = {(options.commit_topic, 0): [marker_record(query_id, batch_id, task)]}
    producer = _Producer(client, options)
    for rb in batches:
        _add_rows(producer, rb, options, task)
    producer.flush(marker)
    return SinkCommitMessage(task, producer.written, False, query_id)


def _add_rows(producer: _Producer, rb: pa.RecordBatch, options: SinkOptions, task: int) -> None:
    names = {name.lower(): i for i, name in enumerate(rb.schema.names)}
    n = rb.num_rows

    def column(name: str) -> list[Any]:
        index = names.get(name)
        return [None] * n if index is None else rb.column(index).to_pylist()

    values = column("value")
    keys = column("key")
    topics = column("topic")
    partitions = column("partition")
    headers = column("headers")
    for i in range(n):
        topic = topics[i] or options.topic
        if topic is None:
            raise SinkSchemaError("null topic present in the data; use the topic option")
        key = _as_bytes(keys[i])
        value = _as_bytes(values[i])
        count = producer.partitions(topic)
        partition = partitions[i]
        if partition is None:
            partition = partition_for_key(key, count) if key is not None else task % count
        elif not 0 <= partition < count:
            raise SinkSchemaError(f"partition {partition} of topic {topic} does not exist")
        record_headers: tuple[tuple[str, bytes | None], ...] = ()
        if headers[i]:
            record_headers = tuple((h["key"], _as_bytes(h["value"])) for h in headers[i])
        size = len(value or b"") + len(key or b"") + 16
        producer.add((topic, partition), Record(0, 0, key, value, record_headers), size)


def write_batch_marker(options: SinkOptions, query_id: str, batch_id: int) -> None:
    """The driver's record that every task of the batch wrote its rows."""
    with RoutedKafkaClient.connect(options.bootstrap_servers, security=options.security) as client:
        append_batch_marker(client, options, query_id, batch_id)


def append_batch_marker(
    client: KafkaClient, options: SinkOptions, query_id: str, batch_id: int
) -> None:
    ensure_commit_topic(client, options.commit_topic)
    record = marker_record(query_id, batch_id, None)
    client.produce({(options.commit_topic, 0): encode_batch([record])}, acks=-1)


def _task_ids() -> tuple[str | None, int | None]:
    context = TaskContext.get()
    if context is None:
        return None, None
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch = context.getLocalProperty(BATCH_ID_PROPERTY)
    return query_id, int(batch) if batch is not None else None


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        query_id, batch_id = _task_ids()
        if query_id is None and self.options.checkpoint_location:
            query_id = self.options.checkpoint_location
        return write_batches(self.options, iterator, query_id=query_id, batch_id=batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        query_ids = {
            m.query_id for m in messages if isinstance(m, SinkCommitMessage) and m.query_id
        }
        if len(query_ids) != 1:
            return
        write_batch_marker(self.options, query_ids.pop(), batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %s aborted; written records stay (at-least-once)", batchId)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``; with ``sink.queryId`` and ``sink.batchId`` (set them in
    ``foreachBatch``) a repeated batch is written once, like the streaming sink."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_batches(
            self.options,
            iterator,
            query_id=self.options.query_id,
            batch_id=self.options.batch_id,
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.query_id is not None and self.options.batch_id is not None:
            write_batch_marker(self.options, self.options.query_id, self.options.batch_id)
