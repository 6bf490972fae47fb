"""Helpers for the transaction interoperability tests: transactional librdkafka
producers and consumers that read a topic to its end under an isolation level."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.interop.kafka_clients import consumer_settings, rdkafka_settings

EOF_CODE = KafkaError._PARTITION_EOF


def transactional_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    producer = Producer(
        rdkafka_settings(bootstrap, transactional_id=transactional_id, linger_ms=5, **extra)
    )
    producer.init_transactions(20)
    return producer


def produce_values(producer: Producer, topic: str, values: list[bytes], partitions: int) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    producer.flush(20)


def read_to_end(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 20.0
) -> list[bytes]:
    """Every value a consumer with `isolation` reads from the start until each partition
    reports its end (for read_committed: the last stable offset)."""
    consumer = Consumer(
        consumer_settings(bootstrap, isolation_level=isolation, enable_partition_eof=True)
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                error = msg.error()
                if error is not None:
                    assert error.code() == EOF_CODE, f"consumer error: {error}"
                    partition = msg.partition()
                    assert partition is not None
                    at_end.add(partition)
                    continue
                at_end.discard(msg.partition())
                value = msg.value()
                assert value is not None
                values.append(value)
    finally:
        consumer.close()
    assert len(at_end) == partitions, f"did not reach the end of {topic} in {timeout_s} s"
    return values


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """ListOffsets(latest) under an isolation level: the LSO for read_committed."""
    consumer = Consumer(consumer_settings(bootstrap, isolation_level=isolation))
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()
