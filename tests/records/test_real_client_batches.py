"""Batches exactly as real producers write them parse, validate and decode.

The broker's Produce handler is wrapped to keep the record bytes each client
sent (before anything of ours touches them); the test then validates those
bytes as the broker does and decodes them back to what the client produced.
Covers librdkafka (confluent-kafka) and kafka-python, every compression codec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from broker.net.request import Request
from broker.protocol.compression import CompressionType
from broker.protocol.records import decode_records, validate_record_set
from tests.integration.broker_harness import running_broker

CODECS = {
    "none": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
# Header values typed as confluent_kafka's produce() takes them (its list is invariant).
MESSAGES: list[tuple[bytes | None, bytes, list[tuple[str, str | bytes | None]]]] = [
    (
        f"key-{i}".encode() if i % 3 else None,
        f"value {i} ".encode() * (i % 7 + 1),
        [("h", b"%d" % i)],
    )
    for i in range(50)
]


class CapturingProduce:
    """The real Produce handler, keeping (api version, record bytes) of every partition."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.api_key = inner.api_key
        self.min_version = inner.min_version
        self.max_version = inner.max_version
        self.captured: list[tuple[int, bytes]] = []

    async def handle(self, request: Request) -> Any:
        for topic in request.body.topic_data:
            for partition in topic.partition_data:
                if partition.records is not None:
                    self.captured.append((request.api_version, bytes(partition.records)))
        return await self.inner.handle(request)

    def error_response(self, request: Request, error_code: int) -> Any:
        return self.inner.error_response(request, error_code)


def produce_with_confluent(port: int, topic: str, codec: str) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "compression.type": codec,
            "linger.ms": 50,
            "enable.idempotence": True,
        }
    )
    for key, value, headers in MESSAGES:
        producer.produce(topic, value=value, key=key, headers=headers)
    assert producer.flush(30) == 0


def produce_with_kafka_python(port: int, topic: str, codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        compression_type=None if codec == "none" else codec,
        linger_ms=50,
    )
    for key, value, headers in MESSAGES:
        producer.send(topic, value=value, key=key, headers=headers)
    producer.flush(30)
    producer.close(10)


def assert_batches_hold_the_messages(captured: list[tuple[int, bytes]], codec: str) -> None:
    assert captured, "the client sent no Produce request"
    decoded = []
    for api_version, records in captured:
        (header,) = validate_record_set(records, api_version=api_version, deep=True)
        assert header.compression == CODECS[codec]
        assert header.magic == 2
        decoded += decode_records(memoryview(records), header)
    assert [(r.key, r.value, list(r.headers)) for r in decoded] == [
        (key, value, [(name, data) for name, data in headers]) for key, value, headers in MESSAGES
    ]


@pytest.mark.interop
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(
    "producer",
    [produce_with_confluent, produce_with_kafka_python],
    ids=["confluent", "kafka-python"],
)
async def test_batches_written_by_real_producers_validate_and_decode_to_what_was_sent(
    tmp_path: Path, producer: Any, codec: str
) -> None:
    async with running_broker(tmp_path, {"num.partitions": "1"}) as server:
        capture = CapturingProduce(server.apis.handler(0))
        server.apis.add_handler(capture)
        with trio.fail_after(60):
            await trio.to_thread.run_sync(producer, server.bound_port(), "captured", codec)
        assert_batches_hold_the_messages(capture.captured, codec)
