"""Transactional vs idempotent produce throughput, and transaction commit latency.

librdkafka drives our broker (`python -m broker serve`, data in a temporary
directory): the same load of 1 KiB values to a 3-partition topic, once from an
idempotent producer and once from a transactional producer committing every
`TXN_SIZE` messages, side by side in one run. A third measurement times
begin → one message → commit round trips (EndTxn waits for the markers), against
one process and against three (`process.count=3`: the topic's partitions are led
by the three processes, so two of every three commits send their marker to another
process over the private channel). Every
load is bounded in time and in message count; 127.0.0.1 only.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.servers import our_broker

PARTITIONS = 3
VALUE_SIZE = 1024
MAX_MESSAGES = 500_000
TXN_SIZE = 1000
MAX_COMMITS = 2000


def _common(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "socket.connection.setup.timeout.ms": 5000,
        "log_level": 3,
    }


def _create_topic(bootstrap: str) -> str:
    name = f"bench-txn-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(_common(bootstrap))
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])[
        name
    ].result(timeout=30)
    return name


def _producer(bootstrap: str, transactional: bool) -> Producer:
    settings = {
        **_common(bootstrap),
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "compression.type": "none",
        "message.timeout.ms": 60_000,
    }
    if transactional:
        settings["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(settings)
    if transactional:
        producer.init_transactions(30)
    return producer


def measure_throughput(bootstrap: str, transactional: bool, duration_s: float) -> dict[str, Any]:
    topic = _create_topic(bootstrap)
    producer = _producer(bootstrap, transactional)
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    value = bytes(VALUE_SIZE)
    sent = 0
    commits = 0
    start = time.perf_counter()
    deadline = start + duration_s
    while sent < MAX_MESSAGES and time.perf_counter() < deadline:
        if transactional:
            producer.begin_transaction()
        for i in range(TXN_SIZE):
            while True:
                try:
                    producer.produce(
                        topic, value=value, partition=i % PARTITIONS, on_delivery=report
                    )
                    break
                except BufferError:
                    producer.poll(0.001)
        sent += TXN_SIZE
        if transactional:
            producer.commit_transaction(60)
            commits += 1
        else:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} delivery failures, first: {failures[0]}")
    return {
        "measurement": "produce 1 KiB, 3 partitions",
        "producer": f"transactional ({TXN_SIZE}/txn)" if transactional else "idempotent",
        "messages": sent,
        "msgs/s": sent / elapsed,
        "MB/s": sent * VALUE_SIZE / elapsed / 1e6,
        "commits": commits,
    }


def measure_commit_latency(bootstrap: str, duration_s: float, processes: int = 1) -> dict[str, Any]:
    topic = _create_topic(bootstrap)
    producer = _producer(bootstrap, True)
    latencies: list[float] = []
    deadline = time.perf_counter() + duration_s
    while len(latencies) < MAX_COMMITS and time.perf_counter() < deadline:
        begin = time.perf_counter()
        producer.begin_transaction()
        producer.produce(topic, value=b"x", partition=len(latencies) % PARTITIONS)
        producer.commit_transaction(30)
        latencies.append((time.perf_counter() - begin) * 1000)
    latencies.sort()
    return {
        "measurement": f"begin + 1 message + commit ({processes} process(es))",
        "producer": "transactional",
        "messages": len(latencies),
        "commits": len(latencies),
        "p50 ms": statistics.median(latencies),
        "p99 ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def run(duration_s: float) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as work, our_broker(Path(work)) as bs:
        rows = [
            measure_throughput(bs, False, duration_s),
            measure_throughput(bs, True, duration_s),
            measure_commit_latency(bs, duration_s),
        ]
    with (
        tempfile.TemporaryDirectory(prefix="bench-txn-") as work,
        our_broker(Path(work), {"process.count": "3"}) as bs,
    ):
        rows.append(measure_commit_latency(bs, duration_s, processes=3))
    return rows


if __name__ == "__main__":
    for row in run(2.0):
        print(row)
