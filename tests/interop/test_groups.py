"""Consumer groups with real clients: confluent-kafka (librdkafka), kafka-python, aiokafka.

One broker serves the module; every test has its own topic and group. The
broker runs with `group.initial.rebalance.delay.ms=0` and a low
`group.min.session.timeout.ms` so that takeovers happen in seconds. Every
wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_harness import BrokerProcess
from tests.interop.kafka_clients import (
    PROCESS_COUNTS,
    interop_broker_running,
    live_bootstrap,
    process_count_id,
    unique_topic,
)

pytestmark = pytest.mark.interop

GROUP_BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
WAIT_S = 30.0


@pytest.fixture(scope="module", params=PROCESS_COUNTS, ids=process_count_id)
def group_broker(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerProcess]:
    """One process, then three: with three, the groups' coordinators are spread over them."""
    data = tmp_path_factory.mktemp("groups") / "data"
    settings = {**GROUP_BROKER_SETTINGS, "process.count": str(request.param)}
    with interop_broker_running(data, settings) as broker:
        yield broker


@pytest.fixture
def bootstrap(group_broker: BrokerProcess) -> str:
    return live_bootstrap(group_broker)


_open_consumers: list[Consumer] = []


@pytest.fixture(autouse=True)
def close_consumers() -> Iterator[None]:
    """A failed test must not leave librdkafka threads retrying in the background."""
    yield
    while _open_consumers:
        with contextlib.suppress(RuntimeError):  # already closed by the test
            _open_consumers.pop().close()


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = unique_topic("groups")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=WAIT_S)
    return topic


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(WAIT_S) == 0


def consumer(bootstrap: str, group: str, **extra: str | int) -> Consumer:
    settings: dict[str, str | int] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 300,
    }
    settings.update(extra)
    created = Consumer(settings)
    _open_consumers.append(created)
    return created


def commit(c: Consumer, message: Message) -> bool:
    """Commit synchronously; a commit that races a rebalance fails as it does on Kafka
    (False), and its record may then be read again."""
    try:
        committed = c.commit(message=message, asynchronous=False)
    except KafkaException as exc:
        code = exc.args[0].code()
        assert code in (KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS), exc
        return False
    # A partition's own error comes back in the list, not as an exception: such a commit
    # did not happen, and the record may be read again, but only for a rebalance's reasons.
    errors = [tp.error for tp in committed or () if tp.error is not None]
    for error in errors:
        assert error.code() in (KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS), (
            f"commit of {message.topic()}[{message.partition()}]@{message.offset()}: {error}"
        )
    return not errors


def wait_for_assignments(consumers: list[Consumer]) -> None:
    """Poll (an empty topic) until every consumer owns partitions."""
    deadline = time.monotonic() + WAIT_S
    while not all(c.assignment() for c in consumers):
        assert time.monotonic() < deadline, [c.assignment() for c in consumers]
        for c in consumers:
            message = c.poll(0.1)
            assert message is None or message.error(), "the topic should still be empty"


def poll_until(
    consumers: list[Consumer],
    done: Callable[[], bool],
    sink: list[tuple[int, bytes]],
    refused: set[bytes] | None = None,
) -> None:
    """Poll every consumer, committing what each read, until `done()` or the deadline;
    records whose commit a rebalance refused go into `refused`."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out with {len(sink)} records"
        for c in consumers:
            message = c.poll(0.1)
            if message is None or message.error():
                continue
            sink.append((id(c), value_of(message)))
            if not commit(c, message) and refused is not None:
                refused.add(value_of(message))


def assert_read_once_unless_refused(
    read: list[bytes], expected: list[bytes], refused: set[bytes], context: str = ""
) -> None:
    """Every expected record read; a record read twice, or one from before, only where
    a rebalance refused its commit (as on Kafka): nothing committed is read again.
    `context`: what a failure should show besides (the group's committed offsets)."""
    assert set(expected) <= set(read)
    again = [v for v in read if v not in expected or read.count(v) > 1]
    assert set(again) <= refused, (
        f"read again though committed: {sorted(set(again))[:5]} ({len(set(again))}); {context}"
    )


def committed_offsets(c: Consumer, topic: str, partitions: int) -> str:
    """The group's committed offsets as `c` reads them now, for a failure's message."""
    asked = [TopicPartition(topic, p) for p in range(partitions)]
    return "committed: " + ", ".join(
        f"{tp.partition}@{tp.offset}{'' if tp.error is None else f' ({tp.error})'}"
        for tp in c.committed(asked, timeout=WAIT_S)
    )


def value_of(message: Message) -> bytes:
    value = message.value()
    assert value is not None, "every record produced here has a value"
    return value


def values(count: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def test_two_confluent_consumers_split_the_topic_then_one_takes_over_and_a_rejoin_resumes(
    bootstrap: str,
) -> None:
    topic = create_topic(bootstrap, 4)
    group = f"split-{uuid.uuid4().hex[:8]}"
    c1, c2 = consumer(bootstrap, group), consumer(bootstrap, group)
    c1.subscribe([topic])
    c2.subscribe([topic])
    wait_for_assignments([c1, c2])
    first_batch = values(200, "a")
    produce(bootstrap, topic, first_batch, 4)
    read: list[tuple[int, bytes]] = []
    refused: set[bytes] = set()
    poll_until([c1, c2], lambda: set(first_batch) <= {v for _, v in read}, read, refused)
    assert_read_once_unless_refused([v for _, v in read], first_batch, refused)
    assert {reader for reader, _ in read} == {id(c1), id(c2)}
    assert len(c1.assignment()) + len(c2.assignment()) == 4
    c2.close()
    second_batch = values(100, "b")
    produce(bootstrap, topic, second_batch, 4)
    taken_over: list[tuple[int, bytes]] = []
    poll_until([c1], lambda: set(second_batch) <= {v for _, v in taken_over}, taken_over, refused)
    assert_read_once_unless_refused(
        [v for _, v in taken_over],
        second_batch,
        refused,
        committed_offsets(c1, topic, 4),
    )
    assert len(c1.assignment()) == 4
    c1.close()
    third_batch = values(40, "c")
    produce(bootstrap, topic, third_batch, 4)
    c3 = consumer(bootstrap, group)
    c3.subscribe([topic])
    resumed: list[tuple[int, bytes]] = []
    poll_until([c3], lambda: len(resumed) >= len(third_batch), resumed)
    extra = c3.poll(1.0)
    c3.close()
    assert sorted(v for _, v in resumed) == sorted(third_batch), "resumed after its commits"
    assert extra is None or extra.error(), "nothing read twice"


def test_cooperative_sticky_consumers_share_and_read_everything(bootstrap: str) -> None:
    topic = create_topic(bootstrap, 4)
    group = f"coop-{uuid.uuid4().hex[:8]}"
    batch = values(120)
    produce(bootstrap, topic, batch, 4)
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    c1 = consumer(bootstrap, group, **strategy)
    c1.subscribe([topic])
    read: list[tuple[int, bytes]] = []
    poll_until([c1], lambda: len(read) >= 20, read)
    c2 = consumer(bootstrap, group, **strategy)
    c2.subscribe([topic])
    deadline = time.monotonic() + WAIT_S
    # Loop on distinct values: a record read twice (see below) must not end it early.
    while not (c1.assignment() and c2.assignment()) or len({v for _, v in read}) < len(batch):
        assert time.monotonic() < deadline, f"cooperative rebalance stuck: {len(read)} records"
        for c in (c1, c2):
            message = c.poll(0.1)
            if message is not None and not message.error():
                read.append((id(c), value_of(message)))
                commit(c, message)
    c1.close()
    c2.close()
    # Commits racing the incremental rebalance may fail (as on Kafka), so a record
    # may be read twice, but none is lost.
    assert sorted(set(v for _, v in read)) == sorted(batch)


def test_admin_client_lists_and_describes_the_group(bootstrap: str) -> None:
    topic = create_topic(bootstrap, 2)
    group = f"admin-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, values(10), 2)
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    read: list[tuple[int, bytes]] = []
    poll_until([c], lambda: len(read) >= 10, read)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(timeout=WAIT_S)
    ours = [g for g in listed.valid if g.group_id == group]
    assert len(ours) == 1
    assert ours[0].state.name == "STABLE"
    description = admin.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
    assert description.state.name == "STABLE"
    assert description.partition_assignor == "range"
    (member,) = description.members
    assigned = sorted(tp.partition for tp in member.assignment.topic_partitions)
    assert assigned == [0, 1]
    c.close()
    description = admin.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
    assert description.state.name == "EMPTY"
    assert description.members == []


def test_kafka_python_group_consumer_reads_the_topic_through(bootstrap: str) -> None:
    from kafka import KafkaConsumer

    topic = create_topic(bootstrap, 3)
    batch = values(90)
    produce(bootstrap, topic, batch, 3)
    kc = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"kp-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(WAIT_S * 1000),
    )
    got: list[bytes] = []
    try:
        for record in kc:
            got.append(record.value)
            if len(got) >= len(batch):
                break
        kc.commit()
    finally:
        kc.close()
    assert sorted(got) == sorted(batch)


def test_aiokafka_group_consumer_reads_the_topic_through(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer

    topic = create_topic(bootstrap, 3)
    batch = values(90)
    produce(bootstrap, topic, batch, 3)

    async def consume() -> list[bytes]:
        ac = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"aio-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
        )
        await ac.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(WAIT_S):
                async for record in ac:
                    got.append(record.value)
                    if len(got) >= len(batch):
                        break
            await ac.commit()
        finally:
            await ac.stop()
        return got

    assert sorted(asyncio.run(consume())) == sorted(batch)


def test_first_record_arrives_soon_after_subscribe_without_rebalance_delay(
    bootstrap: str,
) -> None:
    topic = create_topic(bootstrap, 1)
    produce(bootstrap, topic, [b"hello"], 1)
    c = consumer(bootstrap, f"fast-{uuid.uuid4().hex[:8]}")
    start = time.monotonic()
    c.subscribe([topic])
    message = None
    while message is None or message.error():
        assert time.monotonic() - start < 10, "no record within 10 s of subscribe()"
        message = c.poll(0.1)
    c.close()
    assert message.value() == b"hello"
