"""What the Spark sink's commit protocol reads back per micro-batch, against what it writes.

Run: ``python -m bench.bench_sink_commit [SECONDS]``. Starts a ``broker serve`` process and
runs micro-batches the way Spark's tasks and driver do (``write_task`` per task, then the
driver's batch marker), without Spark, over a client counting the record bytes it
fetches and produces. The commit log first gets a history of markers (older queries and
batches). Side by side, per micro-batch: the anchored read (ours) and the read the sink
did before, the last 20,000 commit-log records per task.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from broker.pipeline.kafka_client import FetchedPartition, KafkaClient
from broker.pipeline.offsets import LATEST
from broker.pipeline.options import SinkOptions
from broker.pipeline.routed_client import RoutedKafkaClient
from broker.pipeline.sink import COMMIT_LOG_TAIL, append_batch_marker, marker_record, write_task
from broker.protocol.records import Record, encode_batch

RECENT_MARKERS = 50


class CountingClient(RoutedKafkaClient):
    """Counts the record bytes fetched and produced over all its instances."""

    fetched_bytes = 0
    produced_bytes = 0

    @classmethod
    def reset(cls) -> None:
        cls.fetched_bytes = cls.produced_bytes = 0

    def fetch(self, topic: str, partition: int, offset: int, **kwargs: Any) -> FetchedPartition:
        fetched = super().fetch(topic, partition, offset, **kwargs)
        CountingClient.fetched_bytes += len(fetched.records)
        return fetched

    def produce(self, batches: dict[tuple[str, int], bytes], **kwargs: Any) -> dict[Any, int]:
        CountingClient.produced_bytes += sum(len(b) for b in batches.values())
        return super().produce(batches, **kwargs)


def write_history(client: KafkaClient, commit_topic: str, query_id: str, markers: int) -> None:
    """Markers of earlier batches of this query and of another one, as after a long run:
    the older ones many to a batch (quick to set up), the recent tail one per batch as the
    sink writes them."""
    for start in range(0, markers, 500):
        batch = [
            marker_record(query_id if n % 2 else "another-query", n // 2, n % 3 or None)
            for n in range(start, min(start + 500, markers))
        ]
        records = [Record(i, 0, m.key, m.value) for i, m in enumerate(batch)]
        client.produce({(commit_topic, 0): encode_batch(records)})
    for n in range(RECENT_MARKERS):
        client.produce({(commit_topic, 0): encode_batch([marker_record("another-query", n, 0)])})


def task_rows(task: int, batch_id: int, rows: int) -> pa.RecordBatch:
    """Rows like the aggregate job's output: a key and its window's JSON totals."""
    values = [
        b'{"window_start":"2026-01-01T00:00:00Z","key":"k%d-%d","count":%d,"bytes":%d}'
        % (task, i, batch_id, i)
        for i in range(rows)
    ]
    keys = [b"k%d-%d" % (task, i) for i in range(rows)]
    return pa.RecordBatch.from_pydict({"key": keys, "value": values})


def micro_batch(
    bootstrap: str, options: SinkOptions, query_id: str, batch_id: int, tasks: int, rows: int
) -> tuple[int, int]:
    """One micro-batch (each task on its own connection, then the driver's commit):
    record bytes read back and written."""
    CountingClient.reset()
    for task in range(tasks):
        with CountingClient.connect(bootstrap) as client:
            message = write_task(
                client,
                options,
                iter([task_rows(task, batch_id, rows)]),
                task,
                query_id=query_id,
                batch_id=batch_id,
            )
            if message.skipped or message.records != rows:
                raise AssertionError(f"task {task} of batch {batch_id}: {message}")
    with CountingClient.connect(bootstrap) as client:
        append_batch_marker(client, options, query_id, batch_id)
    return CountingClient.fetched_bytes, CountingClient.produced_bytes


def tail_read_bytes(bootstrap: str, commit_topic: str) -> int:
    """What one task read before: the last COMMIT_LOG_TAIL records of the commit log."""
    tp = (commit_topic, 0)
    with KafkaClient.connect(bootstrap) as client:
        end = client.list_offsets({tp: LATEST})[tp]
        offset, read = max(0, end - COMMIT_LOG_TAIL), 0
        while offset < end:
            fetched = client.fetch(commit_topic, 0, offset, max_bytes=1 << 20, max_wait_ms=0)
            if not fetched.records:
                break
            read += len(fetched.records)
            offset = _next_offset(fetched.records, offset)
    return read


def _next_offset(records: bytes | bytearray | memoryview, offset: int) -> int:
    from broker.protocol.records import iter_batches

    for header, _ in iter_batches(records, allow_partial_tail=True):
        offset = max(offset, header.last_offset + 1)
    return offset


def run(duration_s: float = 2.0) -> list[dict[str, object]]:
    from tests.integration.broker_harness import start_broker_process, stop_broker_process

    tasks, rows, history = 2, 250, COMMIT_LOG_TAIL
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sink-commit-") as tmp:
        broker = start_broker_process(Path(tmp) / "data")
        try:
            options = SinkOptions.parse(
                {"kafka.bootstrap.servers": broker.bootstrap, "topic": "bench-sink-out"}
            )
            query_id = "bench-query"
            with RoutedKafkaClient.connect(broker.bootstrap) as client:
                client.create_topic("bench-sink-out", 2)
                client.create_topic(options.commit_topic, 1)
                write_history(client, options.commit_topic, query_id, history)
                append_batch_marker(client, options, query_id, history)
            read = written = batches = 0
            deadline = time.monotonic() + duration_s
            for batch_id in range(history + 1, history + 1001):
                got, put = micro_batch(broker.bootstrap, options, query_id, batch_id, tasks, rows)
                read, written, batches = read + got, written + put, batches + 1
                if time.monotonic() > deadline:
                    break
            before = tasks * tail_read_bytes(broker.bootstrap, options.commit_topic)
            for protocol, read_per_batch in (
                ("last-20000-records tail (before)", before),
                ("anchored at the previous batch marker", read // batches),
            ):
                results.append(
                    {
                        "protocol": protocol,
                        "commit_log_records": history + RECENT_MARKERS + batches * (tasks + 1),
                        "tasks": tasks,
                        "micro_batches": batches,
                        "bytes_written_per_batch": written // batches,
                        "bytes_read_per_batch": read_per_batch,
                        "read_over_written": round(read_per_batch / (written / batches), 3),
                    }
                )
        finally:
            stop_broker_process(broker)
    return results


if __name__ == "__main__":
    for line in run(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0):
        print(line)
