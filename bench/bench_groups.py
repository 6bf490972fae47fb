"""Consumer-group latencies with confluent-kafka: ours beside tansu (when installed).

- subscribe -> first record: a fresh consumer in a new group, one record
  already in the topic (`group.initial.rebalance.delay.ms=0` on ours);
- two-member rebalance: a second member subscribes to a group whose first
  member is stable, until both own partitions.

Each is repeated for about `duration_s` per broker (bounded in count) and
reported as the median and the worst.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from bench.bench_produce_consume import _common, _create_topic
from bench.servers import our_broker, tansu_binary, tansu_broker

MAX_ROUNDS = 20
WAIT_S = 30.0


def _consumer(bootstrap: str, group: str) -> Consumer:
    settings = _common(bootstrap)
    settings.update(
        {
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    return Consumer(settings)


def time_to_first_record(bootstrap: str, topic: str) -> float:
    c = _consumer(bootstrap, f"bench-{uuid.uuid4().hex[:8]}")
    try:
        start = time.perf_counter()
        c.subscribe([topic])
        while time.perf_counter() - start < WAIT_S:
            message = c.poll(0.05)
            if message is not None and not message.error():
                return time.perf_counter() - start
        raise TimeoutError("no record")
    finally:
        c.close()


def time_to_rebalance(bootstrap: str, topic: str) -> float:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    first, second = _consumer(bootstrap, group), _consumer(bootstrap, group)
    try:
        first.subscribe([topic])
        deadline = time.perf_counter() + WAIT_S
        while not first.assignment():
            first.poll(0.05)
            if time.perf_counter() > deadline:
                raise TimeoutError("first member got no assignment")
        start = time.perf_counter()
        second.subscribe([topic])
        while not (second.assignment() and len(first.assignment()) < 4):
            first.poll(0.01)
            second.poll(0.01)
            if time.perf_counter() - start > WAIT_S:
                raise TimeoutError("rebalance did not complete")
        return time.perf_counter() - start
    finally:
        first.close()
        second.close()


def measure(bootstrap: str, duration_s: float) -> dict[str, list[float]]:
    first_topic = _create_topic(bootstrap, 1)
    producer = Producer(_common(bootstrap))
    producer.produce(first_topic, b"x")
    producer.flush(WAIT_S)
    rebalance_topic = _create_topic(bootstrap, 4)
    results: dict[str, list[float]] = {"first": [], "rebalance": []}
    for key, fn, topic in (
        ("first", time_to_first_record, first_topic),
        ("rebalance", time_to_rebalance, rebalance_topic),
    ):
        end = time.perf_counter() + duration_s / 2
        while len(results[key]) < 1 or (
            time.perf_counter() < end and len(results[key]) < MAX_ROUNDS
        ):
            results[key].append(fn(bootstrap, topic))
    return results


def _row(name: str, broker: str, samples: list[float]) -> dict[str, Any]:
    return {
        "measure": name,
        "broker": broker,
        "rounds": len(samples),
        "median s": round(statistics.median(samples), 3),
        "max s": round(max(samples), 3),
    }


def run(duration_s: float = 5.0) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    names = {"first": "subscribe -> first record", "rebalance": "two-member rebalance"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        brokers: list[tuple[str, contextlib.AbstractContextManager[str]]] = [
            ("ours", our_broker(work, {"group.initial.rebalance.delay.ms": "0"}))
        ]
        binary = tansu_binary()
        if binary is not None:
            brokers.append(("tansu", tansu_broker(binary, work)))
        for broker_name, context in brokers:
            with context as bootstrap:
                results = measure(bootstrap, duration_s)
            for key, samples in results.items():
                rows.append(_row(names[key], broker_name, samples))
    return rows


if __name__ == "__main__":
    for row in run(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0):
        print(row)
