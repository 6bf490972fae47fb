"""aiokafka against `broker serve`, each test one asyncio run (no Trio here)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.interop.kafka_clients import (
    CODECS,
    Message,
    assert_librdkafka_reads,
    assert_placed_as_reported,
    assert_same_per_partition,
    confluent_produce,
    create_topic,
    make_messages,
    unique_topic,
)

pytestmark = pytest.mark.interop


async def aiokafka_produce(
    bootstrap: str, topic: str, messages: Sequence[Message], **settings: object
) -> list[tuple[int, int]]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=15000, **settings
    )
    async with asyncio.timeout(60):
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic,
                    key=m.key,
                    value=m.value,
                    headers=list(m.headers),
                    partition=m.partition,
                )
                for m in messages
            ]
            placed = await asyncio.gather(*futures)
        finally:
            await producer.stop()
    return [(r.partition, r.offset) for r in placed]


async def aiokafka_read_all(
    bootstrap: str, topic: str, partitions: int, count: int, timeout_s: float = 30
) -> list[tuple[Message, int]]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        request_timeout_ms=15000,
    )
    got: list[tuple[Message, int]] = []
    async with asyncio.timeout(timeout_s + 15):
        await consumer.start()
        try:
            assigned = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(assigned)
            await consumer.seek_to_beginning(*assigned)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while len(got) < count and loop.time() < deadline:
                batches = await consumer.getmany(timeout_ms=200, max_records=2000)
                for records in batches.values():
                    got += [
                        (Message(r.key, r.value, tuple(r.headers), r.partition), r.offset)
                        for r in records
                    ]
            extra = await consumer.getmany(timeout_ms=300)
            assert not any(extra.values()), "more records than produced"
            ends = await consumer.end_offsets(assigned)
        finally:
            await consumer.stop()
    assert len(got) == count, f"consumed {len(got)} of {count} within {timeout_s} s"
    assert sum(ends.values()) == count
    return got


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_producer_and_assigned_consumer_round_trip_every_codec(
    bootstrap: str, codec: str, idempotent: bool
) -> None:
    topic = unique_topic(f"aio-{codec}")
    create_topic(bootstrap, topic, partitions=3)
    messages = make_messages(1200, 3, seed=len(codec) * 3 + idempotent)
    settings: dict[str, object] = {"enable_idempotence": idempotent}
    if codec != "none":
        settings["compression_type"] = codec
    if not idempotent:
        settings["acks"] = 1

    async def scenario() -> tuple[list[tuple[int, int]], list[tuple[Message, int]]]:
        reports = await aiokafka_produce(bootstrap, topic, messages, **settings)
        return reports, await aiokafka_read_all(bootstrap, topic, 3, len(messages))

    reports, got = asyncio.run(scenario())
    assert_placed_as_reported(messages, reports, got)
    assert_librdkafka_reads(bootstrap, topic, 3, messages)


def test_aiokafka_consumer_reads_every_codec_librdkafka_produced(bootstrap: str) -> None:
    topic = unique_topic("aio-from-cfk")
    create_topic(bootstrap, topic, partitions=2)
    messages = make_messages(2000, 2, seed=33)
    for index, codec in enumerate(CODECS):
        confluent_produce(bootstrap, topic, messages[index::5], compression_type=codec)
    ordered = [m for i in range(5) for m in messages[i::5]]
    got = asyncio.run(aiokafka_read_all(bootstrap, topic, 2, len(messages)))
    assert_same_per_partition(ordered, [m for m, _ in got])
