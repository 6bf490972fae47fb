"""Issue 23 defect 12: what the sink's commit protocol reads back per micro-batch.

The tasks and the driver's commit run here without Spark (the same functions Spark
calls, over a client that counts the bytes it fetches and produces), against a real
broker process whose commit log already holds a long history.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from broker.pipeline.kafka_client import FetchedPartition, KafkaClient
from broker.pipeline.options import SinkOptions
from broker.pipeline.routed_client import RoutedKafkaClient
from broker.pipeline.sink import append_batch_marker, marker_record, write_task
from broker.protocol.records import Record, encode_batch
from tests.integration.broker_harness import BrokerProcess
from tests.pipeline.conftest import create_topic, read_topic

HISTORY_MARKERS = 5_000
RECENT_MARKERS = 50
BATCHES = 6
TASKS = 2
ROWS_PER_TASK = 40


class CountingClient(RoutedKafkaClient):
    """Counts record bytes fetched and produced (what crosses the wire as records)."""

    fetched_bytes = 0
    produced_bytes = 0

    def fetch(self, topic: str, partition: int, offset: int, **kwargs: Any) -> FetchedPartition:
        fetched = super().fetch(topic, partition, offset, **kwargs)
        type(self).fetched_bytes += len(fetched.records)
        return fetched

    def produce(self, batches: dict[tuple[str, int], bytes], **kwargs: Any) -> dict[Any, int]:
        type(self).produced_bytes += sum(len(b) for b in batches.values())
        return super().produce(batches, **kwargs)


def _history(client: KafkaClient, commit_topic: str, query_id: str) -> None:
    """Markers of earlier batches of this query and of another query, as after a long run
    (the older ones written many to a batch, which is quicker to set up)."""
    for start in range(0, HISTORY_MARKERS, 500):
        markers = [
            marker_record(query_id if n % 2 else "another-query", n // 2, n % 3 or None)
            for n in range(start, start + 500)
        ]
        records = [Record(i, 0, m.key, m.value) for i, m in enumerate(markers)]
        client.produce({(commit_topic, 0): encode_batch(records)})
    # The recent tail as the sink writes it: one marker per batch.
    for n in range(RECENT_MARKERS):
        client.produce({(commit_topic, 0): encode_batch([marker_record("another-query", n, 0)])})


def _rows(task: int, batch_id: int) -> pa.RecordBatch:
    values = [
        b'{"window_start":"2026-01-01T00:00:00Z","key":"k%d-%d","count":%d,"bytes":%d}'
        % (task, i, batch_id, i)
        for i in range(ROWS_PER_TASK)
    ]
    keys = [b"k%d-%d" % (task, i) for i in range(ROWS_PER_TASK)]
    return pa.RecordBatch.from_pydict({"key": keys, "value": values})


def test_a_micro_batch_reads_back_at_most_twice_what_it_writes(
    broker: BrokerProcess, topic_name: str
) -> None:
    out, commit_topic, query_id = topic_name, f"{topic_name}-commits", "query-under-test"
    create_topic(broker, out, 2)
    options = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "topic": out,
            "sink.commitTopic": commit_topic,
        }
    )
    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        create_topic(broker, commit_topic, 1)
        _history(client, commit_topic, query_id)
        append_batch_marker(client, options, query_id, HISTORY_MARKERS)

    ratios = []
    for batch_id in range(HISTORY_MARKERS + 1, HISTORY_MARKERS + 1 + BATCHES):
        CountingClient.fetched_bytes = CountingClient.produced_bytes = 0
        for task in range(TASKS):
            with CountingClient.connect(broker.bootstrap) as client:
                message = write_task(
                    client,
                    options,
                    iter([_rows(task, batch_id)]),
                    task,
                    query_id=query_id,
                    batch_id=batch_id,
                )
                assert not message.skipped and message.records == ROWS_PER_TASK
        with CountingClient.connect(broker.bootstrap) as client:
            append_batch_marker(client, options, query_id, batch_id)
        ratios.append(CountingClient.fetched_bytes / CountingClient.produced_bytes)
    assert max(ratios) <= 2.0, ratios
    assert len(read_topic(broker, out, 2)) == BATCHES * TASKS * ROWS_PER_TASK


def test_a_replayed_task_after_a_long_history_writes_nothing(
    broker: BrokerProcess, topic_name: str
) -> None:
    out, commit_topic, query_id = topic_name, f"{topic_name}-commits", "replayed-query"
    create_topic(broker, out, 1)
    create_topic(broker, commit_topic, 1)
    options = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "topic": out,
            "sink.commitTopic": commit_topic,
        }
    )
    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        append_batch_marker(client, options, query_id, 6)
        first = write_task(client, options, iter([_rows(0, 7)]), 0, query_id=query_id, batch_id=7)
        # Other queries keep writing markers before this query's restart replays batch 7.
        _history(client, commit_topic, "unrelated")
        again = write_task(client, options, iter([_rows(0, 7)]), 0, query_id=query_id, batch_id=7)
        other_task = write_task(
            client, options, iter([_rows(1, 7)]), 1, query_id=query_id, batch_id=7
        )
    assert not first.skipped and again.skipped and not other_task.skipped
    assert len(read_topic(broker, out)) == 2 * ROWS_PER_TASK
