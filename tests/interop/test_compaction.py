"""confluent-kafka (librdkafka) on a compacted topic of `broker serve`: the cleaner runs
in the background, the consumer reads across the holes it leaves and finds the latest
value of every key; the bad input of compaction gets Kafka's errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.interop.kafka_clients import (
    PROCESS_COUNTS,
    Message,
    admin,
    confluent_produce,
    consumer_settings,
    create_topic,
    interop_broker_running,
    process_count_id,
    rdkafka_settings,
    unique_topic,
)

pytestmark = pytest.mark.interop


def read_from_start(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record up to the partition's end."""
    consumer = Consumer(consumer_settings(bootstrap, enable_partition_eof=True))
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return got
            offset = msg.offset()
            assert offset is not None
            got.append((offset, msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within 20 s ({len(got)} records)")


@pytest.mark.parametrize("processes", PROCESS_COUNTS, ids=process_count_id)
def test_confluent_consumer_reads_the_latest_value_of_each_key_from_a_cleaned_topic(
    tmp_path: Path, processes: int
) -> None:
    overrides = {"log.cleaner.backoff.ms": "100", "process.count": str(processes)}
    with interop_broker_running(tmp_path / "data", overrides) as broker:
        bootstrap = broker.bootstrap
        client = admin(bootstrap)  # alive until the future resolves
        refused = client.create_topics(
            [NewTopic("bad-policy", 1, 1, config={"cleanup.policy": "compacted"})]
        )["bad-policy"]
        with pytest.raises(Exception) as info:
            refused.result(timeout=20)
        error = info.value.args[0]
        assert error.code() == KafkaError.INVALID_CONFIG
        assert "delete" in error.str() and "compact" in error.str()

        topic = unique_topic("compacted")
        create_topic(
            bootstrap,
            topic,
            config={
                "cleanup.policy": "compact",
                "segment.bytes": "4096",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        keys = [b"key-%d" % (i % 25) for i in range(1500)]
        messages = [Message(k, b"value-%d" % i, (), 0) for i, k in enumerate(keys)]
        messages.append(Message(b"key-0", None, (), 0))  # a tombstone
        confluent_produce(
            bootstrap, topic, messages, enable_idempotence=True, acks="all", batch_size=1000
        )
        latest = {m.key: m.value for m in messages}

        deadline = time.monotonic() + 30
        records = read_from_start(bootstrap, topic)
        while len(records) > len(messages) // 2 and time.monotonic() < deadline:
            time.sleep(0.3)
            records = read_from_start(bootstrap, topic)
        assert len(records) <= len(messages) // 2, "the cleaner removed superseded records"
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets)) and offsets[-1] == len(messages) - 1
        assert {key: value for _, key, value in records} == latest
        assert records[-1] == (len(messages) - 1, b"key-0", None), "the tombstone is kept"

        failures: list[KafkaError | None] = []
        producer = Producer(rdkafka_settings(bootstrap, retries=0))
        producer.produce(topic, value=b"no key", on_delivery=lambda err, _: failures.append(err))
        assert producer.flush(20) == 0
        assert failures and failures[0] is not None
        assert failures[0].code() == KafkaError.INVALID_RECORD
