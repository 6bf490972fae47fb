"""confluent-kafka (librdkafka) against `broker serve`: producer, assign() consumer, admin."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from tests.interop.kafka_clients import (
    CODECS,
    Message,
    admin,
    assert_librdkafka_reads,
    assert_same_per_partition,
    confluent_consume,
    confluent_produce,
    consumer_settings,
    create_topic,
    make_messages,
    rdkafka_settings,
    to_message,
    unique_topic,
)

pytestmark = pytest.mark.interop


def assert_reports_match_log(
    messages: list[Message],
    reports: list[tuple[int, int]],
    consumed: list[Message],
    offsets: list[int],
) -> None:
    """Each delivery report's (partition, offset) holds exactly that message, offsets per
    partition are 0, 1, 2 ... in produce order."""
    by_position = {(m.partition, o): m for m, o in zip(consumed, offsets, strict=True)}
    expected = {}
    next_offset: dict[int, int] = {}
    for message, (partition, offset) in zip(messages, reports, strict=True):
        assert partition == message.partition
        assert offset == next_offset.get(partition, 0), f"offset {offset} out of order"
        next_offset[partition] = offset + 1
        expected[(partition, offset)] = message
    assert by_position == expected


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_producer_and_assigned_consumer_round_trip_every_codec(
    bootstrap: str, codec: str, idempotent: bool
) -> None:
    topic = unique_topic(f"cfk-{codec}")
    create_topic(bootstrap, topic, partitions=3)
    messages = make_messages(1500, 3, seed=hash(codec) & 0xFFFF)
    reports = confluent_produce(
        bootstrap,
        topic,
        messages,
        compression_type=codec,
        enable_idempotence=idempotent,
        acks="all",
    )
    consumed = assert_librdkafka_reads(bootstrap, topic, 3, messages)
    assert_reports_match_log(
        messages, reports, [c.message for c in consumed], [c.offset for c in consumed]
    )


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_producer_delivers_every_message_with_each_acks_level(
    bootstrap: str, acks: str
) -> None:
    topic = unique_topic(f"cfk-acks{acks}")
    create_topic(bootstrap, topic, partitions=2)
    messages = make_messages(2000, 2, seed=int(acks == "all") + 7)
    reports = confluent_produce(
        bootstrap, topic, messages, acks=acks, enable_idempotence=False, compression_type="lz4"
    )
    consumed = assert_librdkafka_reads(bootstrap, topic, 2, messages)
    if acks == "0":
        # Kafka answers nothing to acks=0: the client cannot know the offsets.
        assert all(offset is None or offset < 0 for _, offset in reports)
    else:
        assert_reports_match_log(
            messages, reports, [c.message for c in consumed], [c.offset for c in consumed]
        )


def test_confluent_keyed_messages_without_partition_follow_the_default_partitioner(
    bootstrap: str,
) -> None:
    topic = unique_topic("cfk-keyed")
    create_topic(bootstrap, topic, partitions=4)
    producer = Producer(rdkafka_settings(bootstrap, linger_ms=5, enable_idempotence=True))
    placed: list[Message] = []
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            failures.append(err)
        else:
            placed.append(to_message(msg))

    for i in range(1200):
        producer.produce(
            topic, key=f"user-{i % 40}".encode(), value=f"event-{i}".encode(), on_delivery=report
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not failures, failures[:3]
    by_key: dict[bytes | None, set[int]] = {}
    for message in placed:
        by_key.setdefault(message.key, set()).add(message.partition)
    assert all(len(parts) == 1 for parts in by_key.values())
    assert len({m.partition for m in placed}) > 1
    assert_librdkafka_reads(bootstrap, topic, 4, placed)


def test_confluent_consumer_reads_from_specific_offsets_with_create_times(bootstrap: str) -> None:
    topic = unique_topic("cfk-offsets")
    create_topic(bootstrap, topic, partitions=2)
    messages = make_messages(1000, 2, seed=3)
    base = int(time.time() * 1000) - 3_600_000
    timestamps = [base + i * 10 for i in range(len(messages))]
    confluent_produce(bootstrap, topic, messages, timestamps=timestamps, compression_type="zstd")
    consumed = confluent_consume(bootstrap, topic, {0: 120, 1: 333}, 500 - 120 + 500 - 333)
    expected = [m for m in messages if m.partition == 0][120:] + [
        m for m in messages if m.partition == 1
    ][333:]
    assert_same_per_partition(expected, [c.message for c in consumed])
    assert sorted(c.offset for c in consumed if c.message.partition == 0) == list(range(120, 500))
    stamps = {
        (m.partition, i): t
        for p in (0, 1)
        for i, (m, t) in enumerate(
            (m, t) for m, t in zip(messages, timestamps, strict=True) if m.partition == p
        )
    }
    assert all(c.timestamp == stamps[(c.message.partition, c.offset)] for c in consumed)


def test_confluent_consumer_at_end_receives_only_messages_produced_afterwards(
    bootstrap: str,
) -> None:
    topic = unique_topic("cfk-end")
    create_topic(bootstrap, topic, partitions=2)
    old = make_messages(400, 2, seed=11)
    confluent_produce(bootstrap, topic, old)
    consumer = Consumer(consumer_settings(bootstrap, enable_partition_eof=True))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in (0, 1)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 20
        while at_end != {0, 1} and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                error = msg.error()
                assert error is None or error.code() == KafkaError._PARTITION_EOF, error
                assert error is not None, "a record produced before the assignment was read"
                partition = msg.partition()
                assert partition is not None
                at_end.add(partition)
        assert at_end == {0, 1}, "never reached the end of both partitions"
        new = make_messages(300, 2, seed=12)
        confluent_produce(bootstrap, topic, new, compression_type="snappy")
        got: list[tuple[int, confluent_kafka.Message]] = []
        deadline = time.monotonic() + 20
        while len(got) < len(new) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                error, offset = msg.error(), msg.offset()
                if error is None:
                    assert offset is not None
                    got.append((offset, msg))
                else:
                    assert error.code() == KafkaError._PARTITION_EOF, error
        assert_same_per_partition(new, [to_message(m) for _, m in got])
        assert sorted(o for o, m in got if m.partition() == 0) == list(range(200, 350))
        positions = consumer.position([TopicPartition(topic, p) for p in (0, 1)])
        assert [tp.offset for tp in positions] == [350, 350]
    finally:
        consumer.close()


def test_confluent_watermarks_and_offsets_for_times_follow_the_log(bootstrap: str) -> None:
    topic = unique_topic("cfk-watermarks")
    create_topic(bootstrap, topic, partitions=3)
    messages = make_messages(900, 3, seed=5)
    base = int(time.time() * 1000) - 600_000
    confluent_produce(
        bootstrap, topic, messages, timestamps=[base + i for i in range(len(messages))]
    )
    consumer = Consumer(consumer_settings(bootstrap))
    try:
        for p in range(3):
            assert consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (0, 300)
        # Partition p holds timestamps base + p, base + p + 3, ...: the first at or after
        # base + 300 is the record with index 100 in each partition.
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, base + 300) for p in range(3)], timeout=10
        )
        assert [(tp.partition, tp.offset) for tp in found] == [(0, 100), (1, 100), (2, 100)]
        later = consumer.offsets_for_times([TopicPartition(topic, 0, base + 10**7)], timeout=10)
        assert later[0].offset == -1  # no record that late: Kafka answers offset -1
    finally:
        consumer.close()


def test_confluent_admin_creates_topic_with_partitions_and_config(bootstrap: str) -> None:
    client = admin(bootstrap)
    topic = unique_topic("cfk-admin")
    futures = client.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=5,
                replication_factor=1,
                config={"retention.ms": "3600000", "max.message.bytes": "200000"},
            )
        ],
        request_timeout=15,
    )
    futures[topic].result(timeout=20)
    metadata = client.list_topics(timeout=10)
    assert topic in metadata.topics
    described = metadata.topics[topic]
    assert described.error is None
    assert sorted(described.partitions) == [0, 1, 2, 3, 4]
    broker_ids = set(metadata.brokers)
    assert all(p.leader in broker_ids for p in described.partitions.values())
    assert all(
        list(p.replicas) == [p.leader] == list(p.isrs) for p in described.partitions.values()
    )

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = client.describe_configs([resource], request_timeout=15)[resource].result(timeout=20)
    assert configs["retention.ms"].value == "3600000"
    assert configs["max.message.bytes"].value == "200000"
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default

    again = client.create_topics([NewTopic(topic, num_partitions=1)], request_timeout=15)
    with pytest.raises(KafkaException) as raised:
        again[topic].result(timeout=20)
    assert raised.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_confluent_admin_rejects_invalid_topic_requests_with_kafka_error_codes(
    bootstrap: str,
) -> None:
    client = admin(bootstrap)
    bad_config = unique_topic("cfk-badcfg")
    zero_parts = unique_topic("cfk-zero")
    futures = client.create_topics(
        [
            NewTopic(bad_config, num_partitions=1, config={"no.such.config": "1"}),
            NewTopic(zero_parts, num_partitions=0),
            NewTopic("bad/name", num_partitions=1),
        ],
        request_timeout=15,
    )
    codes = {}
    for name, future in futures.items():
        with pytest.raises(KafkaException) as raised:
            future.result(timeout=20)
        codes[name] = raised.value.args[0].code()
    assert codes == {
        bad_config: KafkaError.INVALID_CONFIG,
        zero_parts: KafkaError.INVALID_PARTITIONS,
        "bad/name": KafkaError.TOPIC_EXCEPTION,
    }
    assert not {bad_config, zero_parts} & set(client.list_topics(timeout=10).topics)


def test_confluent_admin_create_partitions_adds_partitions_producers_can_use(
    bootstrap: str,
) -> None:
    client = admin(bootstrap)
    topic = unique_topic("cfk-grow")
    create_topic(bootstrap, topic, partitions=2)
    client.create_partitions([NewPartitions(topic, 5)], request_timeout=15)[topic].result(
        timeout=20
    )
    assert sorted(client.list_topics(topic, timeout=10).topics[topic].partitions) == list(range(5))
    shrink = client.create_partitions([NewPartitions(topic, 3)], request_timeout=15)
    with pytest.raises(KafkaException) as raised:
        shrink[topic].result(timeout=20)
    assert raised.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    messages = make_messages(500, 5, seed=9)
    confluent_produce(bootstrap, topic, messages, enable_idempotence=True)
    consumed = confluent_consume(
        bootstrap, topic, dict.fromkeys(range(5), OFFSET_BEGINNING), len(messages)
    )
    assert_same_per_partition(messages, [c.message for c in consumed])


def test_confluent_admin_delete_topics_removes_topic_and_its_data(bootstrap: str) -> None:
    client = admin(bootstrap)
    topic = unique_topic("cfk-delete")
    create_topic(bootstrap, topic, partitions=2)
    confluent_produce(bootstrap, topic, make_messages(100, 2))
    client.delete_topics([topic], request_timeout=15)[topic].result(timeout=20)
    deadline = time.monotonic() + 10
    while topic in client.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic not in client.list_topics(timeout=10).topics
    described = client.list_topics(topic, timeout=10).topics[topic]
    assert described.error is not None
    assert described.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    again = client.delete_topics([topic], request_timeout=15)
    with pytest.raises(KafkaException) as raised:
        again[topic].result(timeout=20)
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The name is free again, and the new topic starts empty.
    create_topic(bootstrap, topic, partitions=1)
    consumer = Consumer(consumer_settings(bootstrap))
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
    finally:
        consumer.close()
