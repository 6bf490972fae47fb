"""One SparkSession and one broker for the whole pipeline suite (each start costs seconds)."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.pipeline.routed_client import RoutedKafkaClient
from broker.protocol.records import Record, encode_batch
from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)

_topic_numbers = itertools.count()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from broker.pipeline.session import build_session

    session = build_session(
        "local[2]",
        app_name="tests-pipeline",
        conf={
            "spark.sql.shuffle.partitions": "1",
            "spark.sql.streaming.noDataMicroBatches.enabled": "false",
            "spark.default.parallelism": "2",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    # Warm-up: spawns the Python workers once for the session.
    assert session.range(4).repartition(2).rdd.map(lambda row: row.id).sum() == 6
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("pipeline-broker") / "data"
    process = start_broker_process(data_dir, {"num.partitions": "1"})
    try:
        yield process
    finally:
        stop_broker_process(process)


@pytest.fixture
def topic_name() -> str:
    return f"pipe-{next(_topic_numbers)}"


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1) -> None:
    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        assert client.create_topic(name, partitions)


def produce(
    broker: BrokerProcess,
    topic: str,
    partition: int,
    values: list[bytes],
    *,
    keys: list[bytes | None] | None = None,
    timestamp_ms: int | None = None,
) -> int:
    """One batch to one partition; returns its base offset."""
    records = [
        Record(i, 0, keys[i] if keys else b"k%d" % i, value) for i, value in enumerate(values)
    ]
    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        result = client.produce(
            {(topic, partition): encode_batch(records, base_timestamp=timestamp_ms)}
        )
    return result[(topic, partition)]


def read_topic(broker: BrokerProcess, topic: str, partitions: int = 1) -> list[Any]:
    """Every record of a topic, with our own client (no Spark)."""
    from broker.protocol.records import iter_batches, iter_records

    out = []
    with RoutedKafkaClient.connect(broker.bootstrap) as client:
        for p in range(partitions):
            end = client.list_offsets({(topic, p): -1})[(topic, p)]
            offset = client.list_offsets({(topic, p): -2})[(topic, p)]
            while offset < end:
                fetched = client.fetch(topic, p, offset, max_wait_ms=0)
                assert fetched.error_code == 0
                for header, batch in iter_batches(fetched.records, allow_partial_tail=True):
                    for record in iter_records(batch, header):
                        if record.offset >= offset:
                            out.append((p, record))
                    offset = header.last_offset + 1
    return out


def tmp_dir(base: Path, name: str) -> str:
    path = base / name
    return str(path)
