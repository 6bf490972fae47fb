"""What the interoperability tests share: test messages, client settings, bounded helpers.

Every wait here has a deadline: a broker that does not answer fails the test with
what was (not) received instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

# Topics are created explicitly by the tests, as a careful deployment does; a
# producer to a missing topic must then see an error rather than a new topic.
INTEROP_BROKER_SETTINGS = {
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "metrics.port": "-1",
}


PROCESS_COUNTS = (1, 3)
"""The shared brokers of the suites run as one process and as a cluster of three."""


def process_count_id(count: int) -> str:
    return f"{count}-process" if count == 1 else f"{count}-processes"


def start_interop_broker(
    data_dir: Path, overrides: Mapping[str, str] | None = None
) -> BrokerProcess:
    settings = dict(INTEROP_BROKER_SETTINGS)
    settings.update(overrides or {})
    return start_broker_process(data_dir, settings)


@contextlib.contextmanager
def interop_broker_running(
    data_dir: Path, overrides: Mapping[str, str] | None = None
) -> Iterator[BrokerProcess]:
    """A broker for the block, stopped with SIGTERM after it. A broker that crashed under
    the block fails it even when every assertion in it passed."""
    broker = start_interop_broker(data_dir, overrides)
    try:
        yield broker
    finally:
        code = stop_broker_process(broker)
        assert code == 0, f"broker exited with {code}:\n{broker.log_text()[-4000:]}"


def live_bootstrap(broker: BrokerProcess) -> str:
    """The bootstrap address of a shared broker that must still be running."""
    assert broker.process.poll() is None, broker.log_text()[-4000:]
    return broker.bootstrap


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@attrs.frozen
class Message:
    """One record as a client produces it and as every consumer must return it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    partition: int


def make_messages(
    count: int, partitions: int, *, seed: int = 0, value_size: int = 200, nulls: bool = True
) -> list[Message]:
    """Deterministic, varied records: empty and null keys/values, repeated header keys,
    compressible and random payloads, so that every codec has work to do."""
    rng = random.Random(seed)
    messages = []
    for i in range(count):
        size = rng.randrange(0, value_size * 2)
        if i % 3 == 0:
            value: bytes | None = rng.randbytes(size)
        else:
            value = (f"value-{i}-".encode() * (size // 8 + 1))[:size]
        key: bytes | None = f"key-{i}".encode()
        if nulls and i % 97 == 5:
            key = None
        if nulls and i % 101 == 7:
            value = None
        if i % 89 == 3:
            key = b""
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 4 == 1:
            headers = (("h-index", str(i).encode()), ("trace", rng.randbytes(8)))
        elif i % 4 == 2:
            headers = (("dup", b"first"), ("dup", b"second"), ("empty", b""))
        messages.append(Message(key, value, headers, i % partitions))
    return messages


def text_messages(count: int, partitions: int, *, seed: int = 0) -> list[Message]:
    """Printable records without delimiters, for command-line tools like kcat."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 _-"
    return [
        Message(
            f"k{i}".encode(),
            (
                "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 120))) + f"#{i}"
            ).encode(),
            (),
            i % partitions,
        )
        for i in range(count)
    ]


def per_partition(messages: Iterable[Message]) -> dict[int, list[Message]]:
    grouped: dict[int, list[Message]] = defaultdict(list)
    for message in messages:
        grouped[message.partition].append(message)
    return dict(grouped)


def assert_same_per_partition(expected: Sequence[Message], got: Sequence[Message]) -> None:
    """Same records, same partitions, same order within each partition."""
    want, have = per_partition(expected), per_partition(got)
    assert sorted(have) == sorted(want), f"partitions {sorted(have)} != {sorted(want)}"
    for partition, records in want.items():
        received = have[partition]
        assert len(received) == len(records), (
            f"partition {partition}: {len(received)} records, expected {len(records)}"
        )
        for index, (a, b) in enumerate(zip(received, records, strict=True)):
            assert a == b, f"partition {partition} record {index}: got {a!r}, expected {b!r}"


# --- librdkafka (confluent-kafka and kcat) ---------------------------------------------------


def _rdkafka_key(name: str) -> str:
    """librdkafka's dotted names written as Python keywords: linger_ms -> linger.ms."""
    return name if name in ("log_level", "on_delivery", "error_cb") else name.replace("_", ".")


def rdkafka_settings(bootstrap: str, **extra: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 500,
        "retry.backoff.ms": 50,
        "topic.metadata.refresh.interval.ms": 10000,
        "topic.metadata.propagation.max.ms": 1000,
        "log_level": 3,
    }
    settings.update({_rdkafka_key(k): v for k, v in extra.items()})
    return settings


def admin(bootstrap: str) -> AdminClient:
    return AdminClient(rdkafka_settings(bootstrap))


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
) -> None:
    client = admin(bootstrap)  # kept alive until the future resolves
    futures = client.create_topics(
        [
            NewTopic(
                name, num_partitions=partitions, replication_factor=1, config=dict(config or {})
            )
        ],
        request_timeout=15,
        operation_timeout=15,
    )
    futures[name].result(timeout=20)


def confluent_produce(
    bootstrap: str,
    topic: str,
    messages: Sequence[Message],
    *,
    timestamps: Sequence[int] | None = None,
    **producer_settings: Any,
) -> list[tuple[int, int]]:
    """Produce to the messages' partitions; returns (partition, offset) per message from
    the delivery reports, failing on any delivery error or on a report that never came."""
    settings = rdkafka_settings(bootstrap, linger_ms=5, message_timeout_ms=20000)
    settings.update({_rdkafka_key(k): v for k, v in producer_settings.items()})
    producer = Producer(settings)
    reports: dict[int, tuple[int, int]] = {}
    errors: list[tuple[int, KafkaError]] = []

    def on_delivery(index: int) -> Any:
        def report(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append((index, err))
            else:
                reports[index] = (msg.partition(), msg.offset())

        return report

    for index, message in enumerate(messages):
        kwargs: dict[str, Any] = {}
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[index]
        while True:
            try:
                producer.produce(
                    topic,
                    value=message.value,
                    key=message.key,
                    headers=list(message.headers),
                    partition=message.partition,
                    on_delivery=on_delivery(index),
                    **kwargs,
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages still undelivered after 30 s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"
    assert len(reports) == len(messages)
    return [reports[i] for i in range(len(messages))]


def consumer_settings(bootstrap: str, **extra: Any) -> dict[str, Any]:
    # librdkafka's Python binding insists on a group id even for assign(); nothing here
    # joins the group or commits.
    return rdkafka_settings(
        bootstrap,
        group_id=unique_topic("assign-only"),
        enable_auto_commit=False,
        enable_auto_offset_store=False,
        fetch_wait_max_ms=50,
        fetch_error_backoff_ms=50,
        **extra,
    )


@attrs.frozen
class Consumed:
    message: Message
    offset: int
    timestamp: int


def to_message(msg: Any) -> Message:
    return Message(msg.key(), msg.value(), tuple(msg.headers() or ()), msg.partition())


def confluent_consume(
    bootstrap: str,
    topic: str,
    start: Mapping[int, int],
    count: int,
    *,
    timeout_s: float = 30.0,
    consumer: Consumer | None = None,
) -> list[Consumed]:
    """Read `count` records from the given partitions (partition -> start offset, or
    OFFSET_BEGINNING/OFFSET_END) with assign(), then check no more arrive briefly."""
    own = consumer is None
    if consumer is None:
        consumer = Consumer(consumer_settings(bootstrap))
        consumer.assign([TopicPartition(topic, p, o) for p, o in start.items()])
    got: list[Consumed] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                assert msg.error() is None, f"consumer error: {msg.error()}"
                offset = msg.offset()
                assert offset is not None, "a consumed record has an offset"
                got.append(Consumed(to_message(msg), offset, msg.timestamp()[1]))
        extra = consumer.consume(num_messages=10, timeout=0.3)
        assert not [m for m in extra if m.error() is None], "more records than produced"
    finally:
        if own:
            consumer.close()
    assert len(got) == count, f"consumed {len(got)} of {count} records within {timeout_s} s"
    return got


def assert_placed_as_reported(
    messages: Sequence[Message],
    reports: Sequence[tuple[int, int]],
    got: Sequence[tuple[Message, int]],
) -> None:
    """`got` (message, offset) holds `messages` at the places their delivery reports gave."""
    assert_same_per_partition(messages, [m for m, _ in got])
    assert {(m.partition, o): m for m, o in got} == {
        report: m for report, m in zip(reports, messages, strict=True)
    }


def assert_librdkafka_reads(
    bootstrap: str, topic: str, partitions: int, expected: Sequence[Message]
) -> list[Consumed]:
    """librdkafka reads exactly `expected` from the topic's start (per partition, in order)."""
    consumed = read_all_confluent(bootstrap, topic, partitions, len(expected))
    assert_same_per_partition(expected, [c.message for c in consumed])
    return consumed


def read_all_confluent(bootstrap: str, topic: str, partitions: int, count: int) -> list[Consumed]:
    return confluent_consume(
        bootstrap, topic, dict.fromkeys(range(partitions), OFFSET_BEGINNING), count
    )
