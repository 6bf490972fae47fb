"""Acknowledged data survives the broker stopping: SIGTERM, and SIGKILL with per-message
flush. Each test runs its own broker on its own data directory."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from tests.integration.broker_harness import stop_broker_process
from tests.interop.kafka_clients import (
    CODECS,
    Message,
    admin,
    assert_librdkafka_reads,
    confluent_consume,
    confluent_produce,
    consumer_settings,
    create_topic,
    interop_broker_running,
    make_messages,
    rdkafka_settings,
    start_interop_broker,
    unique_topic,
)

pytestmark = pytest.mark.interop


def produce_every_codec(
    bootstrap: str, topic: str, messages: list[Message]
) -> list[tuple[int, int]]:
    reports: list[tuple[int, int]] = []
    step = len(messages) // len(CODECS) + 1
    for index, codec in enumerate(CODECS):
        chunk = messages[index * step : (index + 1) * step]
        reports += confluent_produce(
            bootstrap, topic, chunk, acks="all", enable_idempotence=True, compression_type=codec
        )
    return reports


def test_acknowledged_messages_survive_graceful_restart_and_offsets_continue(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    topic = unique_topic("restart")
    first = make_messages(3000, 3, seed=1)
    later = make_messages(600, 3, seed=2)
    with interop_broker_running(data) as broker:
        create_topic(broker.bootstrap, topic, partitions=3, config={"retention.ms": "86400000"})
        produce_every_codec(broker.bootstrap, topic, first)

    with interop_broker_running(data) as broker:
        assert_librdkafka_reads(broker.bootstrap, topic, 3, first)
        reports = produce_every_codec(broker.bootstrap, topic, later)
        for partition in range(3):
            offsets = [o for p, o in reports if p == partition]
            assert offsets == list(range(1000, 1200)), f"partition {partition}: {offsets[:5]}..."
        assert_librdkafka_reads(broker.bootstrap, topic, 3, first + later)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        client = admin(broker.bootstrap)
        configs = client.describe_configs([resource], request_timeout=15)[resource].result(20)
        assert configs["retention.ms"].value == "86400000"


def test_acknowledged_messages_survive_sigkill_with_flush_after_every_message(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    topic = unique_topic("kill")
    flush_each = {"log.flush.interval.messages": "1"}
    first = make_messages(2000, 2, seed=3)
    broker = start_interop_broker(data, flush_each)
    try:
        create_topic(broker.bootstrap, topic, partitions=2)
        produce_every_codec(broker.bootstrap, topic, first)
    finally:
        stop_broker_process(broker, signal.SIGKILL)
    assert broker.process.returncode == -signal.SIGKILL

    with interop_broker_running(data, flush_each) as broker:
        assert_librdkafka_reads(broker.bootstrap, topic, 2, first)
        more = make_messages(200, 2, seed=4)
        reports = confluent_produce(broker.bootstrap, topic, more, acks="all")
        assert sorted({o for p, o in reports if p == 0}) == list(range(1000, 1100))


def test_sigkill_during_produce_loses_nothing_that_was_acknowledged(tmp_path: Path) -> None:
    """A producer keeps sending while the broker is killed; every record whose delivery
    report said success is at its reported offset after the restart."""
    data = tmp_path / "data"
    topic = unique_topic("kill-busy")
    flush_each = {"log.flush.interval.messages": "1"}
    broker = start_interop_broker(data, flush_each)
    acknowledged: dict[tuple[int, int], bytes] = {}
    failed: list[KafkaError] = []
    try:
        create_topic(broker.bootstrap, topic, partitions=2)
        producer = Producer(
            rdkafka_settings(
                broker.bootstrap,
                acks="all",
                linger_ms=2,
                message_timeout_ms=3000,
                compression_type="lz4",
            )
        )

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                acknowledged[(msg.partition(), msg.offset())] = msg.value()
            else:
                failed.append(err)

        stop = threading.Event()

        def kill_soon() -> None:
            deadline = time.monotonic() + 15
            while len(acknowledged) < 3000 and time.monotonic() < deadline:
                time.sleep(0.01)
            broker.process.send_signal(signal.SIGKILL)
            stop.set()

        killer = threading.Thread(target=kill_soon)
        killer.start()
        sent = 0
        deadline = time.monotonic() + 20
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                producer.produce(
                    topic,
                    value=f"record-{sent}".encode() * 4,
                    partition=sent % 2,
                    on_delivery=report,
                )
                sent += 1
            except BufferError:
                pass
            producer.poll(0.001 if sent % 100 else 0.01)
        killer.join(20)
        producer.flush(15)
    finally:
        stop_broker_process(broker, signal.SIGKILL)
    assert len(acknowledged) >= 3000, f"only {len(acknowledged)} acknowledged before the kill"

    with interop_broker_running(data, flush_each) as broker:
        # Everything acknowledged is there; records sent but not acknowledged may or may
        # not be, so read up to the high watermark and look the acknowledged ones up.
        consumer = Consumer(consumer_settings(broker.bootstrap))
        try:
            ends = [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in (0, 1)
            ]
        finally:
            consumer.close()
        consumed = confluent_consume(broker.bootstrap, topic, {0: 0, 1: 0}, sum(ends))
        log = {(c.message.partition, c.offset): c.message.value for c in consumed}
        missing = {k: v for k, v in acknowledged.items() if log.get(k) != v}
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
