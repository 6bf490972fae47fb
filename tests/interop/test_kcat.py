"""kcat (Debian's, on the system librdkafka) against `broker serve`: -P, -C, -L, -Q."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from typing import Any

import pytest

from tests.integration.broker_harness import BrokerProcess
from tests.interop.kafka_clients import (
    CODECS,
    Message,
    assert_librdkafka_reads,
    assert_same_per_partition,
    confluent_produce,
    create_topic,
    make_messages,
    text_messages,
    unique_topic,
)

pytestmark = pytest.mark.interop

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
_SETTINGS = [
    "-X", "socket.connection.setup.timeout.ms=5000",
    "-X", "topic.metadata.propagation.max.ms=1000",
    "-X", "reconnect.backoff.max.ms=500",
    "-X", "broker.address.family=v4",
    "-m", "10",
]  # fmt: skip


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [KCAT, "-b", bootstrap, *_SETTINGS, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"kcat {args} exited {result.returncode}:\n{result.stderr}"
    return result


def kcat_read_all(bootstrap: str, topic: str, *extra: str) -> list[dict[str, Any]]:
    output = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", *extra).stdout
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def as_message(record: dict[str, Any]) -> Message:
    raw = record.get("headers") or []
    headers = tuple((raw[i], raw[i + 1].encode()) for i in range(0, len(raw), 2))
    key = record["key"]
    payload = record["payload"]
    return Message(
        None if key is None else key.encode(),
        None if payload is None else payload.encode(),
        headers,
        record["partition"],
    )


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produces_keys_and_headers_with_each_codec_and_reads_them_back(
    bootstrap: str, codec: str
) -> None:
    topic = unique_topic(f"kcat-{codec}")
    create_topic(bootstrap, topic, partitions=2)
    headers = (("codec", codec.encode()), ("origin", b"kcat"))
    expected: list[Message] = []
    for partition in (0, 1):
        chunk = [
            Message(m.key, m.value, headers, partition)
            for m in text_messages(1000, 1, seed=partition + 10 * len(codec))
        ]
        lines = "".join(
            f"{m.key.decode()}\t{m.value.decode()}\n" for m in chunk if m.key and m.value
        )
        kcat(
            bootstrap,
            "-P", "-t", topic, "-p", str(partition), "-K", "\t", "-z", codec,
            "-H", f"codec={codec}", "-H", "origin=kcat",
            stdin=lines,
        )  # fmt: skip
        expected += chunk
    records = kcat_read_all(bootstrap, topic, "-o", "beginning")
    assert_same_per_partition(expected, [as_message(r) for r in records])
    for partition in (0, 1):
        offsets = [r["offset"] for r in records if r["partition"] == partition]
        assert offsets == list(range(1000))
    # librdkafka in Python reads the same records, headers included.
    assert_librdkafka_reads(bootstrap, topic, 2, expected)


def test_kcat_reads_what_other_clients_produced_from_beginning_and_relative_offsets(
    bootstrap: str,
) -> None:
    topic = unique_topic("kcat-read")
    create_topic(bootstrap, topic, partitions=3)
    messages = text_messages(1500, 3, seed=4)
    messages = [
        Message(m.key, m.value, (("n", str(i).encode()),), m.partition)
        for i, m in enumerate(messages)
    ]
    for index, codec in enumerate(CODECS):
        confluent_produce(bootstrap, topic, messages[index::5], compression_type=codec)
    ordered = [m for i in range(5) for m in messages[i::5]]
    records = kcat_read_all(bootstrap, topic, "-o", "beginning")
    assert_same_per_partition(ordered, [as_message(r) for r in records])
    # `-o -N`: the last N records of a partition, resolved with ListOffsets.
    tail = kcat_read_all(bootstrap, topic, "-p", "1", "-o", "-40")
    assert [as_message(r) for r in tail] == [m for m in ordered if m.partition == 1][-40:]
    assert [r["offset"] for r in tail] == list(range(460, 500))
    # `-o N`: from an absolute offset.
    middle = kcat_read_all(bootstrap, topic, "-p", "2", "-o", "123")
    assert [r["offset"] for r in middle] == list(range(123, 500))


def test_kcat_lists_brokers_topics_and_partitions(
    bootstrap: str, interop_broker: BrokerProcess
) -> None:
    topic = unique_topic("kcat-meta")
    create_topic(bootstrap, topic, partitions=4)
    listing = json.loads(kcat(bootstrap, "-L", "-J").stdout)
    host = "127.0.0.1"
    nodes = interop_broker.node_ports() or {listing["brokers"][0]["id"]: interop_broker.port}
    assert {b["id"]: b["name"] for b in listing["brokers"]} == {
        node: f"{host}:{port}" for node, port in nodes.items()
    }
    topics = {t["topic"]: t for t in listing["topics"]}
    assert topic in topics
    partitions = topics[topic]["partitions"]
    assert sorted(p["partition"] for p in partitions) == [0, 1, 2, 3]
    leaders = {p["leader"] for p in partitions}
    # One process leads everything; a cluster spreads the four partitions over its nodes.
    assert leaders == set(nodes) if len(nodes) <= 4 else leaders <= set(nodes)
    assert all([r["id"] for r in p["replicas"]] == [p["leader"]] for p in partitions)
    one = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic).stdout)
    assert [t["topic"] for t in one["topics"]] == [topic]


def test_kcat_queries_offsets_by_timestamp(bootstrap: str) -> None:
    topic = unique_topic("kcat-times")
    create_topic(bootstrap, topic, partitions=2)
    messages = make_messages(600, 2, seed=8)
    base = int(time.time() * 1000) - 7_200_000
    # Record i has timestamp base + 5i and goes to partition i % 2.
    confluent_produce(
        bootstrap, topic, messages, timestamps=[base + 5 * i for i in range(len(messages))]
    )
    output = kcat(
        bootstrap, "-Q", "-t", f"{topic}:0:{base + 1000}", "-t", f"{topic}:1:{base + 1001}"
    ).stdout
    found = {
        int(m.group(1)): int(m.group(2))
        for m in re.finditer(r"\[(\d+)\]\s+offset\s+(-?\d+)", output)
    }
    # Partition 0 holds timestamps base + 10k, partition 1 base + 5 + 10k: the first at
    # or after base + 1000 (base + 1001) is record 100 in both.
    assert found == {0: 100, 1: 100}, output
