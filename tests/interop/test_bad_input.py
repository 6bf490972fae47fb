"""Requests the broker must refuse, seen end to end through real clients: the error reaches
the client's delivery report within bounded time, and the broker keeps serving."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError as AioMessageSizeTooLarge
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kafka.errors import MessageSizeTooLargeError

from tests.interop.kafka_clients import (
    admin,
    assert_same_per_partition,
    confluent_produce,
    create_topic,
    make_messages,
    rdkafka_settings,
    read_all_confluent,
    unique_topic,
)

pytestmark = pytest.mark.interop


def produce_collecting_reports(
    bootstrap: str, topic: str, values: list[bytes], **settings: Any
) -> tuple[list[tuple[int, int]], list[KafkaError], float]:
    producer = Producer(
        rdkafka_settings(bootstrap, **{"linger_ms": 5, "message_timeout_ms": 15000, **settings})
    )
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            delivered.append((msg.partition(), msg.offset()))
        else:
            errors.append(err)

    started = time.monotonic()
    remaining = 0
    for value in values:
        # One batch per record: Kafka refuses a whole batch when it is too large.
        producer.produce(topic, value=value, partition=0, on_delivery=report)
        remaining += producer.flush(25)
    elapsed = time.monotonic() - started
    assert remaining == 0, f"{remaining} delivery reports never came (the client hung)"
    return delivered, errors, elapsed


def test_producing_to_a_deleted_topic_reports_unknown_topic_instead_of_hanging(
    bootstrap: str,
) -> None:
    topic = unique_topic("deleted")
    create_topic(bootstrap, topic, partitions=1)
    producer = Producer(rdkafka_settings(bootstrap, linger_ms=5, message_timeout_ms=15000))
    outcomes: list[KafkaError | None] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        outcomes.append(err)

    # The producer knows the topic (metadata cached, connection open) when it disappears.
    for i in range(20):
        producer.produce(topic, value=b"before-%d" % i, on_delivery=report)
    assert producer.flush(20) == 0
    assert outcomes == [None] * 20
    client = admin(bootstrap)
    client.delete_topics([topic], request_timeout=15)[topic].result(timeout=20)
    outcomes.clear()
    started = time.monotonic()
    for i in range(20):
        producer.produce(topic, value=b"after-%d" % i, on_delivery=report)
    remaining = producer.flush(25)
    elapsed = time.monotonic() - started
    assert remaining == 0, "delivery reports never came: the producer hung"
    assert len(outcomes) == 20
    assert all(err is not None for err in outcomes), "a record to a deleted topic was delivered"
    codes = {err.code() for err in outcomes if err is not None}
    # Kafka answers the Produce with UNKNOWN_TOPIC_OR_PARTITION and Metadata with that
    # topic error; librdkafka retries, then (after topic.metadata.propagation.max.ms)
    # marks the topic gone and fails what is queued for its partitions as "unknown
    # partition" (or "unknown topic"), or passes the broker's error through.
    allowed = {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
    }
    assert codes <= allowed, codes
    assert elapsed < 14, f"errors took {elapsed:.1f}s: retried until message.timeout.ms"
    # The broker is fine: other topics still work.
    other = unique_topic("after-delete")
    create_topic(bootstrap, other, partitions=1)
    messages = make_messages(50, 1)
    confluent_produce(bootstrap, other, messages)
    assert_same_per_partition(
        messages, [c.message for c in read_all_confluent(bootstrap, other, 1, 50)]
    )


def test_confluent_record_over_topic_max_message_bytes_fails_with_msg_size_too_large(
    bootstrap: str,
) -> None:
    topic = unique_topic("too-large")
    create_topic(bootstrap, topic, partitions=1, config={"max.message.bytes": "20000"})
    values = [b"small-1", os.urandom(60_000), b"small-2"]
    # The client's own limit is raised so that the broker is the one to refuse.
    delivered, errors, _ = produce_collecting_reports(
        bootstrap, topic, values, message_max_bytes=5_000_000, linger_ms=0, acks="all"
    )
    assert [err.code() for err in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert len(delivered) == 2
    read = read_all_confluent(bootstrap, topic, 1, 2)
    assert [c.message.value for c in read] == [b"small-1", b"small-2"]


def test_confluent_record_over_broker_message_max_bytes_fails_with_msg_size_too_large(
    bootstrap: str,
) -> None:
    topic = unique_topic("too-large-broker")
    create_topic(bootstrap, topic, partitions=1)
    # message.max.bytes of the broker defaults to 1048588 (1 MiB + record batch overhead).
    delivered, errors, _ = produce_collecting_reports(
        bootstrap,
        topic,
        [os.urandom(1_500_000)],
        message_max_bytes=5_000_000,
        compression_type="none",
    )
    assert [err.code() for err in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert delivered == []


def test_kafka_python_record_over_max_message_bytes_raises_message_size_too_large(
    bootstrap: str,
) -> None:
    topic = unique_topic("too-large-kp")
    create_topic(bootstrap, topic, partitions=1, config={"max.message.bytes": "20000"})
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, max_request_size=5_000_000, request_timeout_ms=15000
    )
    try:
        future = producer.send(topic, value=os.urandom(60_000), partition=0)
        with pytest.raises(MessageSizeTooLargeError) as raised:
            future.get(timeout=20)
    finally:
        producer.close(timeout=10)
    # The broker's reason reaches the client (kafka-python >= 2.1 passes it on).
    assert "20000" in str(raised.value)
    # kafka-python's idempotent producer treats the error as fatal to itself; a new
    # producer finds the partition empty and usable.
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        assert producer.send(topic, value=b"fits", partition=0).get(timeout=20).offset == 0
    finally:
        producer.close(timeout=10)


def test_aiokafka_record_over_max_message_bytes_raises_message_size_too_large(
    bootstrap: str,
) -> None:
    topic = unique_topic("too-large-aio")
    create_topic(bootstrap, topic, partitions=1, config={"max.message.bytes": "20000"})

    async def scenario() -> int:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, max_request_size=5_000_000, request_timeout_ms=15000
        )
        async with asyncio.timeout(40):
            await producer.start()
            try:
                with pytest.raises(AioMessageSizeTooLarge):
                    await producer.send_and_wait(topic, value=os.urandom(60_000), partition=0)
                fits = await producer.send_and_wait(topic, value=b"fits", partition=0)
            finally:
                await producer.stop()
        return int(fits.offset)

    assert asyncio.run(scenario()) == 0
