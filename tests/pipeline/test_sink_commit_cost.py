"""Issue 23 defect 12: what the sink's commit protocol reads back per micro-batch.

The tasks and the driver's commit run without Spark (the functions Spark calls, over a
client that counts the record bytes it fetches and produces; bench/bench_sink_commit.py
measures the same), against a real broker process whose commit log holds a history.
"""

from __future__ import annotations

from bench.bench_sink_commit import micro_batch, task_rows, write_history
from broker.pipeline.kafka_client import KafkaClient
from broker.pipeline.options import SinkOptions
from broker.pipeline.routed_client import RoutedKafkaClient
from broker.pipeline.sink import append_batch_marker, write_task
from tests.integration.broker_harness import BrokerProcess
from tests.pipeline.conftest import create_topic, read_topic

HISTORY_MARKERS = 5_000
BATCHES = 6
TASKS = 2
ROWS_PER_TASK = 40


def _sink(broker: BrokerProcess, out: str, partitions: int) -> SinkOptions:
    """An output topic and a commit log of the test's own."""
    create_topic(broker, out, partitions)
    create_topic(broker, f"{out}-commits", 1)
    return SinkOptions.parse(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "topic": out,
            "sink.commitTopic": f"{out}-commits",
        }
    )


def test_a_micro_batch_reads_back_at_most_twice_what_it_writes(
    broker: BrokerProcess, topic_name: str
) -> None:
    out, query_id = topic_name, "query-under-test"
    options = _sink(broker, out, 2)
    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        write_history(client, options.commit_topic, query_id, HISTORY_MARKERS)
        append_batch_marker(client, options, query_id, HISTORY_MARKERS)

    ratios = []
    for batch_id in range(HISTORY_MARKERS + 1, HISTORY_MARKERS + 1 + BATCHES):
        read, written = micro_batch(
            broker.bootstrap, options, query_id, batch_id, TASKS, ROWS_PER_TASK
        )
        ratios.append(read / written)
    assert max(ratios) <= 2.0, ratios
    assert len(read_topic(broker, out, 2)) == BATCHES * TASKS * ROWS_PER_TASK


def test_a_replayed_task_after_a_long_history_writes_nothing(
    broker: BrokerProcess, topic_name: str
) -> None:
    out, query_id = topic_name, "replayed-query"
    options = _sink(broker, out, 1)

    def task(client: KafkaClient, index: int) -> bool:
        rows = iter([task_rows(index, 7, ROWS_PER_TASK)])
        return write_task(client, options, rows, index, query_id=query_id, batch_id=7).skipped

    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        append_batch_marker(client, options, query_id, 6)
        first = task(client, 0)
        # Other queries keep writing markers before this query's restart replays batch 7.
        write_history(client, options.commit_topic, "unrelated", HISTORY_MARKERS)
        again = task(client, 0)
        other_task = task(client, 1)
    assert not first and again and not other_task
    assert len(read_topic(broker, out)) == 2 * ROWS_PER_TASK


def test_a_new_checkpoint_at_the_same_path_writes_its_batch_0(
    broker: BrokerProcess, topic_name: str
) -> None:
    """foreachBatch keys markers by checkpoint path, and batch ids restart at 0 in a new
    checkpoint: the earlier checkpoint's markers of batch 0 must not make it skip."""
    out, query_id = topic_name, "/checkpoints/aggregate"
    options = _sink(broker, out, 1)
    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        for batch_id in range(3):
            rows = iter([task_rows(0, batch_id, 1)])
            write_task(client, options, rows, 0, query_id=query_id, batch_id=batch_id)
            append_batch_marker(client, options, query_id, batch_id)
        restarted = write_task(
            client, options, iter([task_rows(0, 0, 1)]), 0, query_id=query_id, batch_id=0
        )
    assert not restarted.skipped
    assert len(read_topic(broker, out)) == 4
