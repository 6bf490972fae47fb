"""KIP-848 consumer groups with librdkafka's `group.protocol=consumer`.

Two consumers split the partitions, one leaves and the other gets them all, a third
joins, commits and is killed with SIGKILL (no leave): after its session times out
the survivor owns everything and resumes its partitions from the committed offsets.
Short `group.consumer.*` timeouts keep the test in seconds; every wait is bounded.

The group starts with offset 0 committed on every partition, so no consumer ever looks
up `auto.offset.reset` with ListOffsets. librdkafka (2.16, rd_kafka_toppar_handle_Offset)
answers a ListOffsets reply that arrives after its partition was revoked by restarting
the lookup on the stopped partition: the revoked partition goes on fetching from the
beginning outside the assignment, and when it is assigned again those stale messages
reach the application before the ones from the committed offset. A broker answers a
connection's requests in order (as Kafka does), so a ListOffsets sent behind a
long-polling Fetch is answered only when that Fetch is, which on a loaded machine is
after the third member's join has revoked the partition: the survivor then saw
partition 0 from offset 0 instead of from the crashed member's commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_harness import BrokerProcess
from tests.interop.kafka_clients import (
    PROCESS_COUNTS,
    interop_broker_running,
    process_count_id,
    unique_topic,
)

pytestmark = pytest.mark.interop

WAIT_S = 30.0
PARTITIONS = 4
PER_PARTITION = 10
COMMITTED = 5

CRASHING_CONSUMER = """
import sys
from confluent_kafka import Consumer, TopicPartition
bootstrap, group, topic, committed = sys.argv[1:4] + [int(sys.argv[4])]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "enable.auto.commit": False, "auto.offset.reset": "earliest"})
c.subscribe([topic])
while True:
    msg = c.poll(0.2)
    if msg is None or msg.error():
        continue
    if msg.offset() == committed:
        c.commit(offsets=[TopicPartition(topic, msg.partition(), committed)], asynchronous=False)
        print("committed", msg.partition(), flush=True)
"""


@pytest.fixture(scope="module", params=PROCESS_COUNTS, ids=process_count_id)
def broker(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("kip848") / "data"
    settings = {
        "process.count": str(request.param),
        "group.consumer.session.timeout.ms": "3000",
        "group.consumer.heartbeat.interval.ms": "300",
    }
    with interop_broker_running(data, settings) as running:
        yield running


def consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    return c


def poll_until(consumers: list[Consumer], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for c in consumers:
            c.poll(0.05)


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_consumer_protocol_splits_rebalances_and_resumes_after_a_crash(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap
    topic, group = unique_topic("kip848"), unique_topic("kip848-group")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=WAIT_S)
    everything = set(range(PARTITIONS))
    start = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, 0) for p in everything])
    for future in admin.alter_consumer_group_offsets([start]).values():
        future.result(timeout=WAIT_S)

    first, second = consumer(bootstrap, group, topic), consumer(bootstrap, group, topic)
    try:
        poll_until(
            [first, second],
            lambda: (
                owned(first) | owned(second) == everything
                and not owned(first) & owned(second)
                and bool(owned(first))
                and bool(owned(second))
            ),
            "two consumers to split the partitions",
        )
        second.close()
        poll_until([first], lambda: owned(first) == everything, "the survivor to own all")

        crashing = subprocess.Popen(
            [sys.executable, "-c", CRASHING_CONSUMER, bootstrap, group, topic, str(COMMITTED)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            poll_until(
                [first],
                lambda: len(owned(first)) == PARTITIONS // 2,
                "the new member to take half",
            )
            theirs = everything - owned(first)
            producer = Producer({"bootstrap.servers": bootstrap})
            for p in range(PARTITIONS):
                for i in range(PER_PARTITION):
                    producer.produce(topic, f"{p}-{i}".encode(), partition=p)
            assert producer.flush(WAIT_S) == 0
            committed: set[int] = set()
            assert crashing.stdout is not None
            while committed != theirs:
                line = crashing.stdout.readline()
                assert line, "the crashing consumer exited before committing"
                committed.add(int(line.split()[1]))
        finally:
            crashing.send_signal(signal.SIGKILL)
            crashing.wait(WAIT_S)

        first_offsets: dict[int, int] = {}

        def resumed() -> bool:
            msg = first.poll(0.1)
            if msg is not None and not msg.error():
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                first_offsets.setdefault(partition, offset)
            return owned(first) == everything and theirs <= set(first_offsets)

        poll_until([], resumed, "the survivor to take over the crashed member's partitions")
        assert {p: first_offsets[p] for p in theirs} == dict.fromkeys(theirs, COMMITTED)
        committed_now = first.committed(
            [TopicPartition(topic, p) for p in sorted(theirs)], timeout=WAIT_S
        )
        assert [tp.offset for tp in committed_now] == [COMMITTED] * len(theirs)
    finally:
        first.close()
