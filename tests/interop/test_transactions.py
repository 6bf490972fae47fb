"""Transactions with real clients against `broker serve`: confluent-kafka (librdkafka)
commit, abort, send_offsets_to_transaction, fencing, a producer and a broker killed
mid-transaction; kafka-python and aiokafka transactional producers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaException,
    Message,
    TopicPartition,
)

from tests.integration.broker_harness import (
    BrokerProcess,
    env_without_proxies,
    stop_broker_process,
)
from tests.interop.kafka_clients import (
    PROCESS_COUNTS,
    consumer_settings,
    create_topic,
    interop_broker_running,
    process_count_id,
    start_interop_broker,
    unique_topic,
)
from tests.interop.txn_helpers import (
    end_offsets,
    produce_values,
    read_to_end,
    transactional_producer,
)

pytestmark = pytest.mark.interop

FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module", params=PROCESS_COUNTS, ids=process_count_id)
def interop_broker(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerProcess]:
    """One process, then three: with three, each test's partitions are led by different
    processes and its transactional id and group are coordinated by any of them, so
    markers and transactional offsets cross processes."""
    with interop_broker_running(
        tmp_path_factory.mktemp("txn") / "data", {"process.count": str(request.param)}
    ) as broker:
        yield broker


def value_of(message: Message) -> bytes:
    value = message.value()
    assert value is not None
    return value


def test_read_committed_sees_committed_transactions_only(bootstrap: str) -> None:
    topic = unique_topic("txn")
    create_topic(bootstrap, topic, partitions=3)
    producer = transactional_producer(bootstrap, unique_topic("tid"))
    committed = [b"c%d" % i for i in range(30)]
    aborted = [b"a%d" % i for i in range(30)]
    later = [b"d%d" % i for i in range(6)]
    producer.begin_transaction()
    produce_values(producer, topic, committed, 3)
    producer.commit_transaction(20)
    producer.begin_transaction()
    produce_values(producer, topic, aborted, 3)
    producer.abort_transaction(20)
    producer.begin_transaction()
    produce_values(producer, topic, later, 3)
    producer.commit_transaction(20)
    assert sorted(read_to_end(bootstrap, topic, 3, "read_committed")) == sorted(committed + later)
    assert sorted(read_to_end(bootstrap, topic, 3, "read_uncommitted")) == sorted(
        committed + aborted + later
    )
    # 66 records and 3 markers per partition: 22 + 3 in each.
    assert end_offsets(bootstrap, topic, 3, "read_committed") == [25, 25, 25]


def test_an_open_transaction_is_invisible_to_read_committed_until_it_commits(
    bootstrap: str,
) -> None:
    topic = unique_topic("txn-open")
    create_topic(bootstrap, topic, partitions=1)
    producer = transactional_producer(bootstrap, unique_topic("tid"))
    producer.begin_transaction()
    produce_values(producer, topic, [b"x", b"y"], 1)
    assert read_to_end(bootstrap, topic, 1, "read_committed") == []
    assert end_offsets(bootstrap, topic, 1, "read_committed") == [0]
    assert end_offsets(bootstrap, topic, 1, "read_uncommitted") == [2]
    assert read_to_end(bootstrap, topic, 1, "read_uncommitted") == [b"x", b"y"]
    producer.commit_transaction(20)
    assert read_to_end(bootstrap, topic, 1, "read_committed") == [b"x", b"y"]


def test_send_offsets_to_transaction_commits_group_offsets_only_with_the_transaction(
    bootstrap: str,
) -> None:
    source, sink = unique_topic("txn-in"), unique_topic("txn-out")
    create_topic(bootstrap, source, partitions=1)
    create_topic(bootstrap, sink, partitions=1)
    group = unique_topic("txn-group")
    setup = transactional_producer(bootstrap, unique_topic("tid"))
    setup.begin_transaction()
    produce_values(setup, source, [b"in%d" % i for i in range(10)], 1)
    setup.commit_transaction(20)

    settings = consumer_settings(
        bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
    )
    consumer = Consumer({**settings, "group.id": group})
    consumer.subscribe([source])
    producer = transactional_producer(bootstrap, unique_topic("tid"))

    def process(count: int) -> list[TopicPartition]:
        got: list[Message] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count - len(got), timeout=0.2):
                assert msg.error() is None, msg.error()
                got.append(msg)
        assert len(got) == count
        producer.begin_transaction()
        produce_values(producer, sink, [value_of(m).upper() for m in got], 1)
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 20)
        return positions

    def committed() -> int:
        return consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset

    try:
        process(4)
        producer.abort_transaction(20)
        assert committed() < 0  # nothing committed yet: the aborted offsets are gone
        consumer.seek(TopicPartition(source, 0, 0))
        process(4)
        producer.commit_transaction(20)
        assert committed() == 4
        process(6)
        # Open: a read_committed client (require_stable) is told the offset is unstable
        # and retries until its timeout; a read_uncommitted one sees the old offset.
        with pytest.raises(KafkaException):
            consumer.committed([TopicPartition(source, 0)], timeout=2)
        plain = Consumer({**settings, "group.id": group, "isolation.level": "read_uncommitted"})
        try:
            assert plain.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 4
        finally:
            plain.close()
        producer.commit_transaction(20)
        assert committed() == 10
    finally:
        consumer.close()
    assert read_to_end(bootstrap, sink, 1, "read_committed") == [b"IN%d" % i for i in range(10)]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    bootstrap: str,
) -> None:
    topic = unique_topic("txn-fence")
    create_topic(bootstrap, topic, partitions=1)
    tid = unique_topic("tid")
    zombie = transactional_producer(bootstrap, tid)
    zombie.begin_transaction()
    produce_values(zombie, topic, [b"zombie"], 1)
    successor = transactional_producer(bootstrap, tid)
    with pytest.raises(KafkaException) as caught:
        zombie.commit_transaction(20)
    error = caught.value.args[0]
    assert error.fatal() and "fenced" in error.str().lower()
    successor.begin_transaction()
    produce_values(successor, topic, [b"successor"], 1)
    successor.commit_transaction(20)
    assert read_to_end(bootstrap, topic, 1, "read_committed") == [b"successor"]


_KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, tid = sys.argv[1:4]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 2000, "broker.address.family": "v4"})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic, value=b"doomed-%d" % i, partition=i % 2)
    p.flush(20)
    print("produced", flush=True)
    time.sleep(60)
    """
)


def test_a_producer_killed_mid_transaction_is_aborted_after_its_timeout(tmp_path: Path) -> None:
    with interop_broker_running(tmp_path / "data", FAST_TIMEOUTS) as broker:
        topic = unique_topic("txn-kill")
        create_topic(broker.bootstrap, topic, partitions=2)
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED_PRODUCER, broker.bootstrap, topic, unique_topic("t")],
            stdout=subprocess.PIPE,
            text=True,
            env=env_without_proxies(),
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "produced"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        assert end_offsets(broker.bootstrap, topic, 2, "read_committed") == [0, 0]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if end_offsets(broker.bootstrap, topic, 2, "read_committed") == [26, 26]:
                break
            time.sleep(0.2)
        assert end_offsets(broker.bootstrap, topic, 2, "read_committed") == [26, 26]
        assert read_to_end(broker.bootstrap, topic, 2, "read_committed") == []
        assert len(read_to_end(broker.bootstrap, topic, 2, "read_uncommitted")) == 50


def test_a_broker_killed_mid_transaction_recovers_the_same_visible_set(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_interop_broker(data, FAST_TIMEOUTS)
    topic = unique_topic("txn-crash")
    try:
        create_topic(broker.bootstrap, topic, partitions=2)
        producer = transactional_producer(broker.bootstrap, "crash-a")
        producer.begin_transaction()
        produce_values(producer, topic, [b"committed-%d" % i for i in range(20)], 2)
        producer.commit_transaction(20)
        producer.begin_transaction()
        produce_values(producer, topic, [b"aborted-%d" % i for i in range(20)], 2)
        producer.abort_transaction(20)
        hanging = transactional_producer(broker.bootstrap, "crash-b", transaction_timeout_ms=3000)
        hanging.begin_transaction()
        produce_values(hanging, topic, [b"open-%d" % i for i in range(10)], 2)
        visible = sorted(read_to_end(broker.bootstrap, topic, 2, "read_committed"))
        everything = sorted(read_to_end(broker.bootstrap, topic, 2, "read_uncommitted"))
    finally:
        stop_broker_process(broker, signal.SIGKILL)
    assert visible == sorted(b"committed-%d" % i for i in range(20))
    assert len(everything) == 50
    with interop_broker_running(data, FAST_TIMEOUTS) as restarted:
        bootstrap = restarted.bootstrap
        assert sorted(read_to_end(bootstrap, topic, 2, "read_committed")) == visible
        assert sorted(read_to_end(bootstrap, topic, 2, "read_uncommitted")) == everything
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            lso = end_offsets(bootstrap, topic, 2, "read_committed")
            if lso == end_offsets(bootstrap, topic, 2, "read_uncommitted"):
                break
            time.sleep(0.2)
        # The open transaction timed out after the restart and was aborted.
        assert lso == [10 + 1 + 10 + 1 + 5 + 1] * 2
        assert sorted(read_to_end(bootstrap, topic, 2, "read_committed")) == visible
        # The transactional id that committed is still known: its next epoch fences.
        again = transactional_producer(bootstrap, "crash-a")
        again.begin_transaction()
        produce_values(again, topic, [b"after"], 2)
        again.commit_transaction(20)
        assert b"after" in read_to_end(bootstrap, topic, 2, "read_committed")
    assert os.path.exists(data / "transaction-state.journal")


def test_kafka_python_transactions_commit_and_abort(bootstrap: str) -> None:
    from kafka import KafkaProducer

    topic = unique_topic("txn-kp")
    create_topic(bootstrap, topic, partitions=2)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=unique_topic("kp-tid"),
        request_timeout_ms=15000,
        max_block_ms=15000,
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(10):
            producer.send(topic, value=b"kp-commit-%d" % i, partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(10):
            producer.send(topic, value=b"kp-abort-%d" % i, partition=i % 2)
        producer.flush(timeout=20)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert sorted(read_to_end(bootstrap, topic, 2, "read_committed")) == sorted(
        b"kp-commit-%d" % i for i in range(10)
    )
    assert len(read_to_end(bootstrap, topic, 2, "read_uncommitted")) == 20


def test_aiokafka_transactions_and_read_committed_consumer(bootstrap: str) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition

    topic = unique_topic("txn-aio")
    create_topic(bootstrap, topic, partitions=2)

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=unique_topic("aio-tid"),
            request_timeout_ms=15000,
        )
        async with asyncio.timeout(60):
            await producer.start()
            try:
                async with producer.transaction():
                    for i in range(10):
                        await producer.send(topic, value=b"aio-commit-%d" % i, partition=i % 2)
                await producer.begin_transaction()
                for i in range(10):
                    await producer.send(topic, value=b"aio-abort-%d" % i, partition=i % 2)
                await producer.flush()
                await producer.abort_transaction()
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=None,
                isolation_level="read_committed",
                enable_auto_commit=False,
                fetch_max_wait_ms=100,
            )
            await consumer.start()
            try:
                partitions = [AioTopicPartition(topic, p) for p in range(2)]
                consumer.assign(partitions)
                await consumer.seek_to_beginning(*partitions)
                ends = await consumer.end_offsets(partitions)
                got: list[bytes] = []
                deadline = asyncio.get_running_loop().time() + 20

                async def behind() -> bool:
                    return any([await consumer.position(tp) < ends[tp] for tp in partitions])

                while await behind() and asyncio.get_running_loop().time() < deadline:
                    batches = await consumer.getmany(timeout_ms=200)
                    got.extend(m.value for records in batches.values() for m in records)
                assert not await behind()
                return got
            finally:
                await consumer.stop()

    got = asyncio.run(scenario())
    assert sorted(got) == sorted(b"aio-commit-%d" % i for i in range(10))
    assert len(read_to_end(bootstrap, topic, 2, "read_uncommitted")) == 20


def test_aiokafka_commits_a_live_groups_offsets_in_a_transaction(bootstrap: str) -> None:
    """aiokafka's TxnOffsetCommit is v0 (no member id, no generation): Kafka accepts it for
    a group with members, so consume-transform-produce works with a subscribed consumer."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition

    source, sink, group = unique_topic("aio-src"), unique_topic("aio-sink"), unique_topic("aio-g")
    create_topic(bootstrap, source, partitions=1)
    create_topic(bootstrap, sink, partitions=1)

    async def scenario() -> int | None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=unique_topic("aio-ctp")
        )
        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            fetch_max_wait_ms=100,
        )
        async with asyncio.timeout(60):
            await producer.start()
            await consumer.start()
            try:
                async with producer.transaction():
                    for i in range(6):
                        await producer.send(source, value=b"in-%d" % i, partition=0)
                seen = 0
                while seen < 6:
                    batches = await consumer.getmany(timeout_ms=500)
                    for tp, records in batches.items():
                        await producer.begin_transaction()
                        for record in records:
                            await producer.send(sink, value=record.value.upper(), partition=0)
                        await producer.send_offsets_to_transaction(
                            {tp: records[-1].offset + 1}, group
                        )
                        await producer.commit_transaction()
                        seen += len(records)
                committed: int | None = await consumer.committed(AioTopicPartition(source, 0))
                return committed
            finally:
                await consumer.stop()
                await producer.stop()

    assert asyncio.run(scenario()) == 6
    assert sorted(read_to_end(bootstrap, sink, 1, "read_committed")) == [
        b"IN-%d" % i for i in range(6)
    ]
