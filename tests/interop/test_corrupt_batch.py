"""A batch header destroyed on disk, met by real consumers (issue 22, item 4).

librdkafka gets CORRUPT_MESSAGE at the bad offset instead of waiting for ever, the broker
counts and logs it, `broker client consume` names the offsets lost and the next readable
one, and a group committed past it reads on (docs/corrupt-data.md).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import iter_batches
from tests.integration.broker_harness import broker_process
from tests.interop.kafka_clients import rdkafka_settings

pytestmark = pytest.mark.interop

TOPIC = "ledger"
RECORDS = 60
VICTIM = 30  # the batch (one record each) whose header is destroyed


def produce_one_batch_per_record(bootstrap: str) -> None:
    producer = Producer(rdkafka_settings(bootstrap, linger_ms=0, batch_num_messages=1))
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"record-%03d" % i, partition=0)
        assert producer.flush(15) == 0
    assert producer.flush(15) == 0


def destroy_header(segment: Path, batch: int) -> int:
    """Zero the header of the `batch`-th batch of a segment file; its base offset."""
    data = segment.read_bytes()
    position = 0
    for index, (header, view) in enumerate(iter_batches(data)):
        if index == batch:
            with segment.open("r+b") as handle:
                handle.seek(position)
                handle.write(bytes(61))
            return header.base_offset
        position += len(view)
    raise AssertionError(f"{segment} has fewer than {batch + 1} batches")


def consume_until_error(bootstrap: str, group: str, start: int) -> tuple[list[int], int | None]:
    """Offsets read from `start` and the first error code, within a bounded time."""
    consumer = Consumer(
        rdkafka_settings(
            bootstrap, group_id=group, enable_auto_commit=False, fetch_error_backoff_ms=100
        )
    )
    consumer.assign([TopicPartition(TOPIC, 0, start)])
    offsets: list[int] = []
    error: int | None = None
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and error is None and RECORDS - 1 not in offsets[-1:]:
            message = consumer.poll(0.5)
            if message is None:
                continue
            failure = message.error()
            if failure is not None:
                error = failure.code()
            else:
                offset = message.offset()
                assert offset is not None
                offsets.append(offset)
    finally:
        consumer.close()
    return offsets, error


def commit(bootstrap: str, group: str, offset: int) -> None:
    consumer = Consumer(rdkafka_settings(bootstrap, group_id=group, enable_auto_commit=False))
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_a_destroyed_batch_header_is_reported_counted_and_can_be_skipped(tmp_path: Path) -> None:
    overrides = {"metrics.port": "0", "group.initial.rebalance.delay.ms": "0"}
    with broker_process(tmp_path / "data", overrides) as broker:
        bootstrap = broker.bootstrap
        produce_one_batch_per_record(bootstrap)
        bad = destroy_header(tmp_path / "data" / f"{TOPIC}-0" / f"{0:020d}.log", VICTIM)

        offsets, error = consume_until_error(bootstrap, "billing", OFFSET_BEGINNING)
        assert offsets == list(range(bad)), "every record before the bad batch, in order"
        assert error == ErrorCode.CORRUPT_MESSAGE, f"librdkafka got {error}, not CORRUPT_MESSAGE"

        client = subprocess.run(
            [
                *(sys.executable, "-m", "broker", "client", "-b", bootstrap, "consume", TOPIC),
                *("-p", "0", "-o", str(bad), "-e", "--group", "billing"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert client.returncode == 1, client.stderr
        found = re.search(r"offsets (\d+) to (\d+) of ledger-0 cannot be read", client.stderr)
        assert found is not None, client.stderr
        assert int(found.group(1)) == bad
        next_readable = int(found.group(2)) + 1
        assert next_readable == bad + 1, "only the bad batch (one record) is lost"
        assert f"--to-offset {next_readable} --execute" in client.stderr

        commit(bootstrap, "billing", next_readable)
        rest, error = consume_until_error(bootstrap, "billing", next_readable)
        assert error is None and rest == list(range(next_readable, RECORDS))

        metrics_port = re.search(r"serving metrics[^\n]* on http://[^:]+:(\d+)/", broker.log_text())
        assert metrics_port is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port.group(1)}/metrics") as page:
            text = page.read().decode()
        counted = re.search(
            r'kafka_server_brokertopicmetrics_corruptbatchfetches_total\{[^}]*topic="ledger"[^}]*\} (\S+)',
            text,
        )
        assert counted is not None and float(counted.group(1)) >= 1
        assert f"offsets {bad} to" in broker.log_text() and "CORRUPT_MESSAGE" in broker.log_text()
