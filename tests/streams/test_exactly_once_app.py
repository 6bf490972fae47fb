"""A confluent-kafka exactly-once application with state (tests/streams/apps/eos_counter.py:
a running sum per key, its changelog, output and consumed offsets in one transaction),
killed in the middle of the stream and started again, and the broker killed and restarted
under it: every input record is counted once, and the output is exactly the running sums."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from confluent_kafka import Producer

from tests.integration.broker_harness import BrokerProcess, stop_broker_process
from tests.interop.kafka_clients import create_topic, rdkafka_settings
from tests.streams.stream_harness import (
    free_port,
    latest_by_key,
    read_committed,
    start_app,
    start_broker,
    wait_for,
)

KEYS = [b"k%d" % i for i in range(6)]
RECORDS = 600
PARTITIONS = 2
APP_ARGS = ["input", "output", "changelog", "summer", "summer-1"]


def produce_input(bootstrap: str) -> dict[bytes, list[int]]:
    """RECORDS values over KEYS, each key always to the same partition; returns each
    key's values in the order the application must see them."""
    producer = Producer(rdkafka_settings(bootstrap, acks="all", enable_idempotence=True))
    values: dict[bytes, list[int]] = defaultdict(list)
    for i in range(RECORDS):
        key = KEYS[i % len(KEYS)]
        producer.produce("input", key=key, value=b"%d" % i, partition=KEYS.index(key) % PARTITIONS)
        values[key].append(i)
    assert producer.flush(30) == 0
    return values


def committed_count(log: Path) -> int:
    lines = [line for line in log.read_text().splitlines() if line.startswith("committed ")]
    return len(lines)


def test_exactly_once_app_gives_exact_results_across_app_and_broker_restarts(
    tmp_path: Path,
) -> None:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    data = tmp_path / "data"
    broker: BrokerProcess = start_broker(data, port)
    apps: list[subprocess.Popen[str]] = []
    log = tmp_path / "app.log"
    try:
        for topic in ("input", "output", "changelog"):
            create_topic(bootstrap, topic, PARTITIONS)
        values = produce_input(bootstrap)
        # The first instance is killed with SIGKILL in the middle of the stream.
        apps.append(start_app("eos_counter.py", [bootstrap, *APP_ARGS], log))
        wait_for(lambda: committed_count(log) >= 5, 60, "the first instance commits")
        apps[-1].kill()
        apps[-1].wait(10)
        # The second takes over; the broker is killed and restarted under it.
        before = committed_count(log)
        apps.append(start_app("eos_counter.py", [bootstrap, *APP_ARGS], log))
        wait_for(lambda: committed_count(log) >= before + 5, 60, "the second instance commits")
        stop_broker_process(broker, signal.SIGKILL)
        broker = start_broker(data, port)
        deadline = time.monotonic() + 60
        while len(read_committed(bootstrap, "output")) < RECORDS:
            assert time.monotonic() < deadline, "the output was not complete within 60 s"
            if apps[-1].poll() is not None:  # a fatal client error: its supervisor restarts it
                assert len(apps) < 6, "the application keeps failing:\n" + log.read_text()
                apps.append(start_app("eos_counter.py", [bootstrap, *APP_ARGS], log))
            time.sleep(0.5)
        apps[-1].terminate()
        assert apps[-1].wait(20) == 0
        output = read_committed(bootstrap, "output")
        changelog = latest_by_key(read_committed(bootstrap, "changelog"))
    finally:
        for app in apps:
            if app.poll() is None:
                app.kill()
                app.wait(10)
        stop_broker_process(broker)
    running_sums = {
        key: [sum(vals[: n + 1]) for n in range(len(vals))] for key, vals in values.items()
    }
    got: dict[bytes, list[int]] = defaultdict(list)
    for partition, key, value in output:
        assert partition == KEYS.index(key) % PARTITIONS
        got[key].append(int(value))
    assert dict(got) == running_sums
    assert changelog == {key: b"%d" % sum(vals) for key, vals in values.items()}
