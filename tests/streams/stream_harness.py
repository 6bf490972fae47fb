"""What the stream-application tests share: a broker on a fixed port (so applications
keep their bootstrap address across a broker restart), applications as subprocesses,
and reading a topic as a read_committed consumer does."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from tests.integration.broker_harness import (
    BrokerProcess,
    env_without_proxies,
    start_broker_process,
)
from tests.interop.kafka_clients import consumer_settings

APPS = Path(__file__).parent / "apps"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_broker(data_dir: Path, port: int) -> BrokerProcess:
    return start_broker_process(
        data_dir,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "1",
            "num.io.threads": "2",
        },
    )


def start_app(script: str, args: list[str], log: Path) -> subprocess.Popen[str]:
    with log.open("a", encoding="utf-8") as out:
        return subprocess.Popen(
            [sys.executable, str(APPS / script), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=log.parent,
            env=env_without_proxies(),
        )


def read_committed(
    bootstrap: str, topic: str, timeout_s: float = 20.0
) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every committed record, in offset order per partition."""
    consumer = Consumer(
        consumer_settings(bootstrap, isolation_level="read_committed", enable_partition_eof=True)
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    records: list[tuple[int, bytes, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                error, partition = msg.error(), msg.partition()
                assert partition is not None
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, f"consumer error: {error}"
                    at_end.add(partition)
                    continue
                at_end.discard(partition)
                key, value = msg.key(), msg.value()
                assert key is not None and value is not None
                records.append((partition, key, value))
    finally:
        consumer.close()
    assert len(at_end) == len(partitions), f"did not read {topic} to its end in {timeout_s} s"
    return records


def latest_by_key(records: list[tuple[int, bytes, bytes]]) -> dict[bytes, bytes]:
    return {key: value for _, key, value in records}


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.2)
