"""The trio-kafka source against a real broker process, in one SparkSession."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from broker.pipeline import jobs
from broker.pipeline.kafka_client import KafkaClient
from tests.integration.broker_harness import BrokerProcess
from tests.pipeline.conftest import create_topic, produce

QUERY_TIMEOUT_S = 90


def _archive(spark: Any, broker: BrokerProcess, topic: str, tmp_path: Path, **options: str) -> Any:
    query = jobs.start_archive(
        spark,
        bootstrap=broker.bootstrap,
        subscribe=topic,
        output=str(tmp_path / "out"),
        checkpoint=str(tmp_path / "checkpoint"),
        available_now=True,
        options=options,
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "archive query did not finish"
    assert query.exception() is None
    return query


def _archived(tmp_path: Path) -> list[dict[str, Any]]:
    table = ds.dataset(str(tmp_path / "out"), format="parquet", partitioning="hive").to_table()
    return table.to_pylist()  # type: ignore[no-any-return]


def _batch_read(spark: Any, broker: BrokerProcess, **options: str) -> list[Any]:
    reader = spark.read.format("trio-kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().collect()  # type: ignore[no-any-return]


def test_archive_writes_every_record_exactly_once_across_restarts(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, 0, [b"a%d" % i for i in range(40)])
    produce(broker, topic_name, 1, [b"b%d" % i for i in range(25)])
    _archive(spark, broker, topic_name, tmp_path)
    produce(broker, topic_name, 0, [b"c%d" % i for i in range(30)])
    produce(broker, topic_name, 1, [b"d%d" % i for i in range(5)])
    second = _archive(spark, broker, topic_name, tmp_path)

    rows = _archived(tmp_path)
    seen = sorted((r["partition"], r["offset"]) for r in rows)
    assert seen == sorted([(0, o) for o in range(70)] + [(1, o) for o in range(30)])
    values = {(r["partition"], r["offset"]): r["value"] for r in rows}
    assert values[(0, 45)] == b"c5" and values[(1, 27)] == b"d2"
    assert {r["topic"] for r in rows} == {topic_name}
    assert sum(p["numInputRows"] for p in second.recentProgress) == 35


def test_max_offsets_per_trigger_bounds_each_micro_batch(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, 0, [b"x"] * 60)
    produce(broker, topic_name, 1, [b"y"] * 20)
    query = _archive(spark, broker, topic_name, tmp_path, maxOffsetsPerTrigger="25")
    sizes = [p["numInputRows"] for p in query.recentProgress]
    assert sum(sizes) == 80
    assert max(sizes) <= 25
    assert len(sizes) >= 4
    assert len(_archived(tmp_path)) == 80


def test_starting_offsets_json_and_ending_offsets_are_honoured(
    spark: Any, broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, 0, [b"%d" % i for i in range(20)])
    produce(broker, topic_name, 1, [b"%d" % i for i in range(20)])
    rows = _batch_read(
        spark,
        broker,
        subscribe=topic_name,
        startingOffsets=json.dumps({topic_name: {"0": 15, "1": -2}}),
        endingOffsets=json.dumps({topic_name: {"0": -1, "1": 3}}),
    )
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(0, o) for o in range(15, 20)] + [(1, o) for o in range(3)]
    assert all(isinstance(r.value, bytearray | bytes) for r in rows)


def test_starting_timestamp_skips_older_records(
    spark: Any, broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker, topic_name, 1)
    now = int(time.time() * 1000)
    produce(broker, topic_name, 0, [b"old"] * 5, timestamp_ms=now - 60_000)
    produce(broker, topic_name, 0, [b"new"] * 3, timestamp_ms=now)
    rows = _batch_read(
        spark, broker, assign=json.dumps({topic_name: [0]}), startingTimestamp=str(now - 1000)
    )
    assert [r.value for r in rows] == [b"new"] * 3
    assert [r.offset for r in rows] == [5, 6, 7]


def test_fail_on_data_loss_raises_when_unread_offsets_were_deleted(
    spark: Any, broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker, topic_name, 1)
    produce(broker, topic_name, 0, [b"%d" % i for i in range(10)])
    with KafkaClient.connect(broker.bootstrap) as client:
        assert client.delete_records({(topic_name, 0): 6}) == {(topic_name, 0): 6}
    starting = json.dumps({topic_name: {"0": 2}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        _batch_read(spark, broker, subscribe=topic_name, startingOffsets=starting)
    rows = _batch_read(
        spark, broker, subscribe=topic_name, startingOffsets=starting, failOnDataLoss="false"
    )
    assert [r.offset for r in rows] == [6, 7, 8, 9]


def test_new_partitions_and_headers_reach_a_running_stream(
    spark: Any, broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker, topic_name, 1)
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(broker, first, 1)
    produce(broker, first, 0, [b"one"])
    stream = (
        spark.readStream.format("trio-kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribePattern", f"{topic_name}-.*")
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    query = stream.writeStream.format("memory").queryName(topic_name.replace("-", "_")).start()
    try:
        query.processAllAvailable()
        create_topic(broker, second, 1)
        produce(broker, second, 0, [b"two", b"three"])
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        rows: list[Any] = []
        while time.monotonic() < deadline and len(rows) < 3:
            query.processAllAvailable()
            rows = spark.sql(f"select * from {topic_name.replace('-', '_')}").collect()
            time.sleep(0.2)
    finally:
        query.stop()
    assert sorted((r.topic, r.value) for r in rows) == [
        (first, b"one"),
        (second, b"three"),
        (second, b"two"),
    ]
    assert "headers" in rows[0].asDict()
