"""Client quotas seen by real clients: librdkafka held to its produce and fetch quotas,
told so through throttle_time_ms, while a client on another client id is not slowed.

Kafka's rate sensor forgets a whole window at a time, so a throttled client's rate
swings with a period of `quota.window.num` windows around the quota, and a fresh
client first takes a burst of (num - 1) windows' worth. The broker runs with 1 s
windows as Kafka does, but 5 of them instead of 11: the burst falls in the 2.5 s
warm-up, and the 10 s measurement spans two whole periods. Requests are kept small
(batch.size) so that one request is a small part of a window.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from broker.client.cmd_quotas import alter_client_quotas
from broker.client.session import ClientSession
from tests.integration.broker_harness import BrokerProcess
from tests.interop.kafka_clients import (
    consumer_settings,
    create_topic,
    interop_broker_running,
    live_bootstrap,
    rdkafka_settings,
    unique_topic,
)

QUOTA_BYTES_PER_S = 400_000
WARM_UP_S = 2.5
MEASURE_S = 10.0
VALUE = b"q" * 1000


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with interop_broker_running(
        tmp_path_factory.mktemp("quotas") / "data", {"quota.window.num": "5"}
    ) as broker:
        yield broker


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], key: str, value: float) -> None:
    async def alter() -> None:
        async with await ClientSession.open(bootstrap) as session:
            await alter_client_quotas(session, entity, [(key, value)])

    trio.run(alter)


class ThrottleLog:
    """librdkafka's throttle_cb: one event per response that carried throttle_time_ms.

    The Python binding gives the throttle in seconds (a float), so it is scaled back to
    milliseconds here; truncating it would turn every sub-second throttle into 0.
    """

    def __init__(self) -> None:
        self.times_ms: list[float] = []

    def __call__(self, event: Any) -> None:
        self.times_ms.append(float(event.throttle_time) * 1000.0)


def produce_for(
    bootstrap: str, topic: str, client_id: str, seconds: float, throttles: ThrottleLog
) -> list[tuple[float, int]]:
    """Produce as fast as librdkafka lets us for `seconds`; (time, bytes) per delivery."""
    delivered: list[tuple[float, int]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((time.monotonic(), len(msg.value())))

    settings = rdkafka_settings(
        bootstrap,
        client_id=client_id,
        linger_ms=5,
        batch_size=5000,
        queue_buffering_max_kbytes=1024,
        message_timeout_ms=30000,
    )
    settings["throttle_cb"] = throttles
    producer = Producer(settings)
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline and sent < 1_000_000:
        try:
            producer.produce(topic, VALUE, on_delivery=on_delivery)
            sent += 1
            producer.poll(0)
        except BufferError:
            producer.poll(0.005)
    producer.purge()
    producer.flush(5)
    assert not [e for e in errors if "Purged" not in str(e)], errors[:3]
    return delivered


def rate_between(events: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(size for at, size in events if start <= at < end) / (end - start)


def test_a_producer_is_held_to_its_produce_quota_and_told_so(quota_broker: BrokerProcess) -> None:
    bootstrap = live_bootstrap(quota_broker)
    topic = unique_topic("produce-quota")
    create_topic(bootstrap, topic)
    set_quota(bootstrap, [("client-id", "held-producer")], "producer_byte_rate", QUOTA_BYTES_PER_S)
    throttles = ThrottleLog()
    started = time.monotonic()
    delivered = produce_for(bootstrap, topic, "held-producer", WARM_UP_S + MEASURE_S, throttles)
    rate = rate_between(delivered, started + WARM_UP_S, started + WARM_UP_S + MEASURE_S)
    print(f"held producer: {rate:.0f} B/s, {len(throttles.times_ms)} throttles")
    assert abs(rate - QUOTA_BYTES_PER_S) <= 0.1 * QUOTA_BYTES_PER_S
    assert throttles.times_ms and max(throttles.times_ms) > 0

    free = ThrottleLog()
    started = time.monotonic()
    delivered = produce_for(bootstrap, topic, "free-producer", 2.0, free)
    free_rate = rate_between(delivered, started, started + 2.0)
    print(f"free producer: {free_rate:.0f} B/s")
    assert free_rate > 2 * QUOTA_BYTES_PER_S
    assert free.times_ms == []


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer(
        rdkafka_settings(bootstrap, client_id="filler", linger_ms=5, batch_size=5000)
    )
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(30) == 0


def test_a_consumer_is_held_to_its_fetch_quota_and_told_so(quota_broker: BrokerProcess) -> None:
    bootstrap = live_bootstrap(quota_broker)
    topic = unique_topic("fetch-quota")
    create_topic(bootstrap, topic)
    needed = int(QUOTA_BYTES_PER_S * (WARM_UP_S + MEASURE_S + 3) / len(VALUE))
    fill(bootstrap, topic, needed)
    set_quota(bootstrap, [("client-id", "held-consumer")], "consumer_byte_rate", QUOTA_BYTES_PER_S)
    throttles = ThrottleLog()
    settings = consumer_settings(
        bootstrap,
        client_id="held-consumer",
        max_partition_fetch_bytes=5000,
        fetch_max_bytes=5000,
        message_max_bytes=5000,
    )
    settings["throttle_cb"] = throttles
    consumer = Consumer(settings)
    consumed: list[tuple[float, int]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        started = time.monotonic()
        deadline = started + WARM_UP_S + MEASURE_S
        while time.monotonic() < deadline and len(consumed) < needed:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                consumed.append((time.monotonic(), len(msg.value() or b"")))
    finally:
        consumer.close()
    assert len(consumed) < needed, (
        "the topic ran dry: the measurement is of the data, not the quota"
    )
    rate = rate_between(consumed, started + WARM_UP_S, started + WARM_UP_S + MEASURE_S)
    print(f"held consumer: {rate:.0f} B/s, {len(throttles.times_ms)} throttles")
    assert abs(rate - QUOTA_BYTES_PER_S) <= 0.1 * QUOTA_BYTES_PER_S
    assert throttles.times_ms and max(throttles.times_ms) > 0
