"""The source: batch and streaming readers over the broker's Kafka API.

The driver side (``initialOffset``, ``latestOffset``, ``partitions``) resolves
the subscription with Metadata and offsets with ListOffsets; each input
partition is one offset range of one topic-partition, read on an executor with
Fetch in a bounded loop and yielded as Arrow batches. Nothing touches the
broker's files, so any executor that can reach the broker can read.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from broker.pipeline.arrow_records import RecordColumns
from broker.pipeline.kafka_client import KafkaClient, KafkaClientError
from broker.pipeline.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    TopicPartition,
    offsets_from_json,
    offsets_to_dict,
    plan_ranges,
    rate_limit,
)
from broker.pipeline.options import SourceOptions, StartSpec
from broker.pipeline.retries import on_retriable_errors
from broker.pipeline.routed_client import RoutedKafkaClient
from broker.protocol.error_codes import ErrorCode

log = logging.getLogger("broker.pipeline.source")

_RETRY_DELAY_S = 0.2
# Rows per Arrow batch handed to Spark: big enough that Spark's per-batch cost vanishes
# (measured: 10k and 50k rows per batch run equally fast), small enough that Spark
# consumes one batch while the worker decodes the next, instead of waiting for a whole
# Fetch (a 4 MiB Fetch of compressed 100-byte values is ~600k rows).
ROWS_PER_ARROW_BATCH = 32_768


class DataLossError(RuntimeError):
    """Offsets the query still had to read are gone (retention, DeleteRecords, deletion)."""


def _data_loss_message(detail: str) -> str:
    return (
        f"{detail}. Some data may have been lost because it is not available in the broker "
        "any more: either the data was aged out by retention or deleted (DeleteRecords) before "
        "it was processed, or the topic was deleted. If you want the query to continue, set "
        "the source option failOnDataLoss to false."
    )


def report_data_loss(fail: bool, detail: str) -> None:
    if fail:
        raise DataLossError(_data_loss_message(detail))
    log.warning("%s; skipping ahead (failOnDataLoss=false)", detail)


class KafkaInputPartition(InputPartition):
    """One offset range and what an executor needs to read it (no connection)."""

    def __init__(self, offset_range: OffsetRange, options: SourceOptions) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.options = options


# ------------------------------------------------------------- driver side


def connect(options: SourceOptions) -> KafkaClient:
    """A client for the source's bootstrap servers, with its TLS and SASL settings, that
    sends each partition's requests to its leader."""
    return RoutedKafkaClient.connect(options.bootstrap_servers, security=options.security)


def topic_partitions(client: KafkaClient, options: SourceOptions) -> list[TopicPartition]:
    """The partitions the subscription covers now."""
    if options.assign:
        return list(options.assign)
    if options.subscribe:
        counts = client.partitions_for(list(options.subscribe))
    else:
        assert options.subscribe_pattern is not None
        pattern = re.compile(options.subscribe_pattern)
        counts = {
            name: n
            for name, n in client.partitions_for(None).items()
            if pattern.fullmatch(name) and not name.startswith("__")
        }
    return [(topic, p) for topic, n in sorted(counts.items()) for p in range(n)]


def resolve(
    client: KafkaClient, spec: StartSpec, partitions: Sequence[TopicPartition]
) -> PartitionOffsets:
    """Concrete offsets of ``spec`` for ``partitions`` (ListOffsets for -2, -1, timestamps)."""
    if not partitions:
        return {}
    wanted: dict[TopicPartition, int] = {}
    concrete: PartitionOffsets = {}
    for tp in partitions:
        if spec.kind == "earliest":
            wanted[tp] = EARLIEST
        elif spec.kind == "latest":
            wanted[tp] = LATEST
        elif spec.kind == "timestamp":
            wanted[tp] = spec.timestamp
        elif spec.kind == "timestamps":
            # A partition the JSON leaves out starts at the latest offset.
            wanted[tp] = spec.offsets.get(tp, LATEST)
        else:
            offset = spec.offsets.get(tp, LATEST)
            if offset >= 0:
                concrete[tp] = offset
            else:
                wanted[tp] = offset
    found = client.list_offsets(wanted)
    by_time = [tp for tp, ts in wanted.items() if ts >= 0 and found[tp] < 0]
    if by_time:
        # No record at or after the timestamp: start at the end, as Kafka's consumer does.
        found.update(client.list_offsets(dict.fromkeys(by_time, LATEST)))
    concrete.update(found)
    return concrete


def _with_retries(action: Any, attempts: int = 25) -> Any:
    """Run ``action(client)``-style calls again while the broker says "try again"."""
    return on_retriable_errors(attempts, _RETRY_DELAY_S)(action)


# ----------------------------------------------------------- executor side


def read_range(offset_range: OffsetRange, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    """Fetch [start, end) of one partition as Arrow batches; bounded in time."""
    topic, partition, end = offset_range.topic, offset_range.partition, offset_range.end
    offset = offset_range.start
    columns = RecordColumns(topic, partition, options.include_headers)
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    max_bytes = options.fetch_max_bytes
    with connect(options) as client:
        while offset < end:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"reading {topic}-{partition} stalled at offset {offset} (range ends at "
                    f"{end}) for {options.poll_timeout_ms} ms"
                )
            fetched = client.fetch(topic, partition, offset, max_bytes=max_bytes, max_wait_ms=200)
            if fetched.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                earliest = client.list_offsets({(topic, partition): EARLIEST})[(topic, partition)]
                if offset >= earliest:
                    raise DataLossError(
                        _data_loss_message(
                            f"{topic}-{partition}: offset {offset} is past the end of the log"
                        )
                    )
                report_data_loss(
                    options.fail_on_data_loss,
                    f"{topic}-{partition}: offsets {offset} to {min(earliest, end) - 1} were "
                    f"deleted (log start offset is now {earliest})",
                )
                offset = earliest
                continue
            if fetched.error_code != ErrorCode.NONE:
                error = KafkaClientError(fetched.error_code, f"fetch {topic}-{partition}")
                if error.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    report_data_loss(
                        options.fail_on_data_loss, f"{topic}-{partition} no longer exists"
                    )
                    return
                if not error.retriable:
                    raise error
                time.sleep(_RETRY_DELAY_S)
                continue
            next_offset = yield from columns.decode(
                fetched.records, offset, end, ROWS_PER_ARROW_BATCH
            )
            if len(columns):
                yield columns.take()
            if next_offset > offset:
                offset = next_offset
                deadline = time.monotonic() + options.poll_timeout_ms / 1000
            elif len(fetched.records) >= max_bytes:
                max_bytes *= 2  # one batch larger than the fetch size: ask for more
            elif fetched.high_watermark >= end and not len(fetched.records):
                # The rest of the range is gone (e.g. compacted/aborted away): nothing to read.
                return


# ----------------------------------------------------------------- readers


class KafkaBatchReader(DataSourceReader):
    """``spark.read``: startingOffsets (default earliest) to endingOffsets (default latest)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        with connect(self.options) as client:
            tps = _with_retries(lambda: topic_partitions(client, self.options))
            start = resolve(client, self.options.starting, tps)
            end = resolve(client, self.options.ending, tps)
        ranges = plan_ranges(start, end, self.options.min_partitions)
        if not ranges:
            # Spark wants at least one partition to plan a scan.
            ranges = [OffsetRange(tp[0], tp[1], 0, 0) for tp in tps[:1]] or [
                OffsetRange("", 0, 0, 0)
            ]
        return [KafkaInputPartition(r, self.options) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        if partition.offset_range.size <= 0:
            return iter(())
        return read_range(partition.offset_range, partition.options)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches of offset ranges, Spark's Kafka semantics."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:
        with connect(self.options) as client:
            tps = _with_retries(lambda: topic_partitions(client, self.options))
            return offsets_to_dict(resolve(client, self.options.starting, tps))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with connect(self.options) as client:
            self._target = self._latest_offsets(client)

    def _latest_offsets(self, client: KafkaClient) -> PartitionOffsets:
        tps = _with_retries(lambda: topic_partitions(client, self.options))
        return resolve(client, StartSpec("latest"), tps)

    def latestOffset(self, start: Mapping[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = offsets_from_json(start)
        with connect(self.options) as client:
            latest = (
                dict(self._target) if self._target is not None else self._latest_offsets(client)
            )
            new = [tp for tp in latest if tp not in begin]
            if new:
                log.info("new partitions %s start from the earliest offset", new)
                begin.update(resolve(client, StartSpec("earliest"), new))
        for tp, offset in list(begin.items()):
            if tp not in latest:
                if self._target is None:
                    report_data_loss(
                        self.options.fail_on_data_loss, f"{tp[0]}-{tp[1]} is gone from the broker"
                    )
                latest[tp] = offset
            elif latest[tp] < offset:
                report_data_loss(
                    self.options.fail_on_data_loss,
                    f"{tp[0]}-{tp[1]}: the log ends at {latest[tp]}, before offset {offset} "
                    "the query already read",
                )
                latest[tp] = offset
        self._latest = dict(latest)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(limit.max_rows, begin, latest)
        return offsets_to_dict(latest)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return None if self._latest is None else offsets_to_dict(self._latest)

    def partitions(
        self, start: Mapping[str, Any], end: Mapping[str, Any]
    ) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            with connect(self.options) as client:
                begin.update(resolve(client, StartSpec("earliest"), new))
        ranges = plan_ranges(begin, until, self.options.min_partitions)
        return [KafkaInputPartition(r, self.options) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        return read_range(partition.offset_range, partition.options)

    def commit(self, end: Mapping[str, Any]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in the broker."""
