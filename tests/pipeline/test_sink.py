"""The trio-kafka sink and the aggregate job, against a real broker process."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from broker.pipeline import jobs
from broker.pipeline.sink import murmur2, partition_for_key
from tests.integration.broker_harness import BrokerProcess
from tests.pipeline.conftest import create_topic, produce, read_topic

QUERY_TIMEOUT_S = 90


def test_murmur2_matches_kafkas_default_partitioner() -> None:
    # Values from Kafka's UtilsTest.testMurmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert partition_for_key(b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10


def test_batch_write_sends_topic_key_value_headers_and_partition(
    spark: Any, broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker, topic_name, 3)
    frame = spark.createDataFrame(
        [
            (topic_name, "k1", b"v1", 2, [("h", b"1")]),
            (topic_name, None, b"v2", 0, []),
            (topic_name, "k3", None, 1, None),
        ],
        "topic string, key string, value binary, partition int, "
        "headers array<struct<key: string, value: binary>>",
    )
    frame.write.format("trio-kafka").mode("append").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).save()
    records = {(p, r.key, r.value, r.headers) for p, r in read_topic(broker, topic_name, 3)}
    assert records == {
        (2, b"k1", b"v1", (("h", b"1"),)),
        (0, None, b"v2", ()),
        (1, b"k3", None, ()),
    }


def test_keyed_rows_without_partition_go_where_kafkas_partitioner_puts_them(
    spark: Any, broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker, topic_name, 4)
    keys = [f"key-{i}" for i in range(20)]
    frame = spark.createDataFrame([(k, "v") for k in keys], "key string, value string")
    (
        frame.write.format("trio-kafka")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic_name)
        .save()
    )
    placed = {r.key.decode(): p for p, r in read_topic(broker, topic_name, 4)}
    assert placed == {k: partition_for_key(k.encode(), 4) for k in keys}


def _copy_stream(
    spark: Any, broker: BrokerProcess, source: str, sink: str, checkpoint: Path
) -> Any:
    frame = (
        spark.readStream.format("trio-kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "15")
        .load()
        .selectExpr("key", "value")
    )
    query = (
        frame.writeStream.format("trio-kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    assert query.exception() is None
    return query


def test_a_replayed_micro_batch_writes_nothing_twice(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    source, sink = topic_name, f"{topic_name}-out"
    create_topic(broker, source, 1)
    create_topic(broker, sink, 1)
    produce(broker, source, 0, [b"v%d" % i for i in range(25)])
    checkpoint = tmp_path / "checkpoint"
    _copy_stream(spark, broker, source, sink, checkpoint)
    assert [r.value for _, r in read_topic(broker, sink)] == [b"v%d" % i for i in range(25)]

    # Forget that the last batch was committed, as if the driver died after the sink
    # wrote it: Spark runs it again from the offset log.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    again = _copy_stream(spark, broker, source, sink, checkpoint)
    assert sum(p["numInputRows"] for p in again.recentProgress) > 0
    assert [r.value for _, r in read_topic(broker, sink)] == [b"v%d" % i for i in range(25)]

    produce(broker, source, 0, [b"w"] * 3)
    _copy_stream(spark, broker, source, sink, checkpoint)
    assert len(read_topic(broker, sink)) == 28


def test_aggregate_job_counts_records_and_bytes_per_key_and_window(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    source, out = topic_name, f"{topic_name}-agg"
    create_topic(broker, source, 2)
    create_topic(broker, out, 1)
    base = (int(time.time()) // 60) * 60_000
    produce(broker, source, 0, [b"aaaa"] * 3, keys=[b"a"] * 3, timestamp_ms=base + 1000)
    produce(broker, source, 1, [b"bb"] * 2, keys=[b"b"] * 2, timestamp_ms=base + 2000)
    produce(broker, source, 0, [b"a"], keys=[b"a"], timestamp_ms=base + 3000)
    query = jobs.start_aggregate(
        spark,
        bootstrap=broker.bootstrap,
        subscribe=source,
        output_topic=out,
        checkpoint=str(tmp_path / "checkpoint"),
        window="1 minute",
        watermark="1 minute",
        available_now=True,
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    assert query.exception() is None
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for _, record in read_topic(broker, out):
        row = json.loads(record.value)
        latest[(row["window_start"], row["key"])] = row
    window = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base / 1000))
    assert {k: (v["count"], v["bytes"]) for k, v in latest.items()} == {
        (window, "a"): (4, 13),
        (window, "b"): (2, 4),
    }
