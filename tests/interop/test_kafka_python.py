"""kafka-python against `broker serve`: its default (idempotent) producer, assign() consumer,
admin client."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from tests.interop.kafka_clients import (
    CODECS,
    Message,
    assert_librdkafka_reads,
    assert_placed_as_reported,
    assert_same_per_partition,
    confluent_produce,
    make_messages,
    unique_topic,
)

pytestmark = pytest.mark.interop

_TIMEOUTS = {"request_timeout_ms": 15000}


def kafka_python_produce(
    bootstrap: str, topic: str, messages: Sequence[Message], **settings: object
) -> list[tuple[int, int]]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=5, max_block_ms=15000, **_TIMEOUTS, **settings
    )
    try:
        # The default producer must really be idempotent against this broker: kafka-python
        # turns idempotence off silently when it infers a broker older than 0.11.
        assert producer.config["enable_idempotence"] is True, "idempotence was turned off"
        futures = [
            producer.send(
                topic,
                key=m.key,
                value=m.value,
                headers=list(m.headers),
                partition=m.partition,
            )
            for m in messages
        ]
        producer.flush(timeout=30)
        placed = [f.get(timeout=1) for f in futures]
    finally:
        producer.close(timeout=10)
    return [(r.partition, r.offset) for r in placed]


def kafka_python_read_all(
    bootstrap: str, topic: str, partitions: int, count: int, timeout_s: float = 30
) -> list[tuple[Message, int]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        **_TIMEOUTS,
    )
    got: list[tuple[Message, int]] = []
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200, max_records=2000).values():
                got += [
                    (
                        Message(r.key, r.value, tuple(r.headers or ()), r.partition),
                        r.offset,
                    )
                    for r in records
                ]
        extra = consumer.poll(timeout_ms=300)
        assert not any(extra.values()), "more records than produced"
        ends = consumer.end_offsets(assigned)
    finally:
        consumer.close()
    assert len(got) == count, f"consumed {len(got)} of {count} within {timeout_s} s"
    assert sum(ends.values()) == count
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_default_idempotent_producer_round_trips_every_codec(
    bootstrap: str, codec: str
) -> None:
    topic = unique_topic(f"kp-{codec}")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **_TIMEOUTS)
    try:
        admin.create_topics([NewTopic(topic, 3, 1)], timeout_ms=15000)
    finally:
        admin.close()
    messages = make_messages(1500, 3, seed=len(codec))
    settings: dict[str, object] = {} if codec == "none" else {"compression_type": codec}
    reports = kafka_python_produce(bootstrap, topic, messages, **settings)
    got = kafka_python_read_all(bootstrap, topic, 3, len(messages))
    assert_placed_as_reported(messages, reports, got)
    # A different client reads the same bytes back.
    assert_librdkafka_reads(bootstrap, topic, 3, messages)


def test_kafka_python_consumer_reads_what_librdkafka_produced_compressed(bootstrap: str) -> None:
    topic = unique_topic("kp-from-cfk")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **_TIMEOUTS)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)], timeout_ms=15000)
    finally:
        admin.close()
    messages = make_messages(2000, 2, seed=21)
    for codec, chunk in zip(CODECS, (messages[i::5] for i in range(5)), strict=True):
        confluent_produce(bootstrap, topic, chunk, compression_type=codec, enable_idempotence=True)
    ordered = [m for i in range(5) for m in messages[i::5]]
    got = kafka_python_read_all(bootstrap, topic, 2, len(messages))
    assert_same_per_partition(ordered, [m for m, _ in got])


def test_kafka_python_admin_creates_and_deletes_topics(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **_TIMEOUTS)
    first, second = unique_topic("kp-admin-a"), unique_topic("kp-admin-b")
    try:
        admin.create_topics(
            [
                NewTopic(first, 3, 1),
                NewTopic(second, 1, 1, topic_configs={"retention.ms": "60000"}),
            ],
            timeout_ms=15000,
        )
        assert {first, second} <= set(admin.list_topics())
        described = {t["name"]: t for t in admin.describe_topics([first, second])}
        assert len(described[first]["partitions"]) == 3
        assert len(described[second]["partitions"]) == 1
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(first, 1, 1)], timeout_ms=15000)
        admin.delete_topics([first, second], timeout_ms=15000)
        deadline = time.monotonic() + 10
        while {first, second} & set(admin.list_topics()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not {first, second} & set(admin.list_topics())
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([first], timeout_ms=15000)
    finally:
        admin.close()
