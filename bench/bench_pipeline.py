"""Throughput of the trio-kafka source and latency of the aggregate job, on a real broker.

Run: ``python -m bench.bench_pipeline`` (prints one line per measurement). Starts a
``broker serve`` process and a local[2] SparkSession; every wait is bounded.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker.pipeline import jobs
from broker.pipeline.kafka_client import KafkaClient
from broker.protocol.compression import CompressionType
from broker.protocol.records import Record, encode_batch, iter_batches, iter_records

_BATCH_ROWS = 1000
_QUERY_TIMEOUT_S = 300


def _fill(bootstrap: str, topic: str, rows: int, value_size: int, partitions: int) -> None:
    value = b"v" * value_size
    with KafkaClient.connect(bootstrap) as client:
        client.create_topic(topic, partitions)
        batch = encode_batch(
            [Record(i, 0, b"key-%d" % (i % 100), value) for i in range(_BATCH_ROWS)],
            compression=CompressionType.LZ4,
        )
        for n in range(0, rows, _BATCH_ROWS * partitions):
            client.produce({(topic, p): batch for p in range(partitions)})
            del n


def _source_throughput(
    spark: Any, bootstrap: str, topic: str, rows: int, value_size: int, sink: str, tmp: Path
) -> dict[str, object]:
    frame = (
        spark.readStream.format("trio-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    writer = frame.writeStream.trigger(availableNow=True).option(
        "checkpointLocation", str(tmp / f"ck-{topic}-{sink}")
    )
    if sink == "parquet":
        writer = writer.format("parquet").option("path", str(tmp / f"out-{topic}"))
    else:
        writer = writer.format("noop")
    start = time.perf_counter()
    query = writer.start()
    if not query.awaitTermination(_QUERY_TIMEOUT_S):
        query.stop()
        raise TimeoutError(f"{sink} query over {topic} did not finish")
    elapsed = time.perf_counter() - start
    done = sum(p["numInputRows"] for p in query.recentProgress)
    # Inside the micro-batches only: excludes the query's start and stop (~2-3 s here,
    # mostly spawning the driver-side Python source runner), which the end-to-end
    # rate above includes and which dominates it at these sizes.
    in_batches = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress)
    return {
        "name": f"source->{sink}[{value_size}B]",
        "rows": done,
        "rows_per_s": round(done / elapsed),
        "MB_per_s": round(done * value_size / elapsed / 1e6, 1),
        "seconds": round(elapsed, 2),
        "batch_rows_per_s": round(done / max(in_batches / 1000, 1e-3)),
    }


def _output_rows(client: KafkaClient, topic: str, offset: int) -> tuple[list[Any], int]:
    fetched = client.fetch(topic, 0, offset, max_wait_ms=50)
    rows = []
    for header, batch in iter_batches(fetched.records, allow_partial_tail=True):
        for record in iter_records(batch, header):
            if record.offset >= offset:
                rows.append(json.loads(record.value or b"{}"))
        offset = header.last_offset + 1
    return rows, offset


def _aggregate_latency(spark: Any, bootstrap: str, tmp: Path, samples: int) -> dict[str, object]:
    source, out = "bench-agg-in", "bench-agg-out"
    with KafkaClient.connect(bootstrap) as client:
        client.create_topic(source, 1)
        client.create_topic(out, 1)
    query = jobs.start_aggregate(
        spark,
        bootstrap=bootstrap,
        subscribe=source,
        output_topic=out,
        checkpoint=str(tmp / "ck-agg"),
        window="1 minute",
        watermark="1 minute",
    )
    latencies = []
    try:
        with KafkaClient.connect(bootstrap) as client:
            offset = 0
            for i in range(samples + 1):  # the first sample pays for the query's start
                key = f"k{i}"
                start = time.perf_counter()
                client.produce({(source, 0): encode_batch([Record(0, 0, key.encode(), b"x")])})
                deadline = start + 60
                seen = False
                while not seen and time.perf_counter() < deadline:
                    rows, offset = _output_rows(client, out, offset)
                    seen = any(r.get("key") == key for r in rows)
                if not seen:
                    raise TimeoutError("aggregate output did not appear within 60 s")
                if i:
                    latencies.append(time.perf_counter() - start)
    finally:
        query.stop()
    return {
        "name": "aggregate append-to-output latency",
        "samples": len(latencies),
        "median_ms": round(statistics.median(latencies) * 1000),
        "max_ms": round(max(latencies) * 1000),
    }


def run(duration_s: float = 10.0) -> list[dict[str, object]]:
    from broker.pipeline.session import build_session
    from tests.integration.broker_harness import start_broker_process, stop_broker_process

    scale = max(duration_s / 10.0, 0.1)
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp_dir:
        tmp = Path(tmp_dir)
        broker = start_broker_process(tmp / "data")
        spark = build_session(
            "local[2]",
            app_name="bench-pipeline",
            conf={
                "spark.sql.shuffle.partitions": "1",
                "spark.sql.streaming.noDataMicroBatches.enabled": "false",
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            sizes = [(100, int(1_000_000 * scale)), (1024, int(200_000 * scale))]
            _fill(broker.bootstrap, "bench-warm", 2000, 100, 2)
            _source_throughput(spark, broker.bootstrap, "bench-warm", 2000, 100, "noop", tmp)
            for value_size, rows in sizes:
                topic = f"bench-{value_size}"
                _fill(broker.bootstrap, topic, rows, value_size, 2)
                for sink in ("noop", "parquet"):
                    results.append(
                        _source_throughput(
                            spark, broker.bootstrap, topic, rows, value_size, sink, tmp
                        )
                    )
            results.append(_aggregate_latency(spark, broker.bootstrap, tmp, samples=8))
        finally:
            spark.stop()
            stop_broker_process(broker)
    return results


if __name__ == "__main__":
    for line in run(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0):
        print(line)
