"""A KIP-848 consumer group survives the loss of its coordinator's host: three
`broker serve` hosts on 127.0.0.2-4 with a real ZooKeeper, two confluent-kafka consumers
with `group.protocol=consumer` splitting a topic, the coordinator (the leader of
`__consumer_offsets`-0) killed with SIGKILL.

What Kafka guarantees, and what is asserted: the survivor that leads the partition next
replays the group's records, so the members heartbeat on with their member epochs (no
rejoin: the group epoch does not move), keep their partitions and go on from where they
were (no record consumed twice, the records produced after the failover delivered),
and their committed offsets are there, fetched with their epochs (OffsetFetch v9).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from broker.client.connection import KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ConsumerGroupDescribeRequest
from tests.hosts.test_hosts_cluster import WAIT_S
from tests.hosts.test_internal_state import (
    address,
    bootstrap,
    find_coordinator,
    start_hosts,
)
from tests.integration.broker_harness import stop_broker_process
from tests.interop.kafka_clients import admin

GROUP = "kip848-failover"
TOPIC = "kip848-failover-topic"
PARTITIONS = 4
BEFORE = 6
"""Records per partition before the kill; offset COMMITTED is committed."""
AFTER = 3
"""Records per partition produced after the failover."""
COMMITTED = 2
Epochs = tuple[int, dict[str, int]]


SETTINGS = {
    # Long enough that no member's session ends while the coordinator moves; the new
    # coordinator starts every loaded member's session afresh.
    "group.consumer.session.timeout.ms": "20000",
    "group.consumer.heartbeat.interval.ms": "300",
    "zookeeper.session.timeout.ms": "4000",
}


def produce(servers: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5})
    for partition in range(PARTITIONS):
        for i in range(first, first + count):
            producer.produce(TOPIC, f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(WAIT_S) == 0


def create_and_fill_topic(servers: str) -> None:
    client = admin(servers)  # kept while its futures are pending
    futures = client.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], request_timeout=20)
    futures[TOPIC].result(timeout=WAIT_S)
    produce(servers, 0, BEFORE)


class Member:
    """A consumer of the group and every (partition, offset) it was given."""

    def __init__(self, servers: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe([TOPIC])
        self.seen: list[tuple[int, int]] = []

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is not None and message.error() is None:
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            self.seen.append((partition, offset))

    def has_read(self, end: int) -> bool:
        """Every owned partition read up to `end`."""
        seen = set(self.seen)
        return bool(self.owned()) and all((p, end - 1) in seen for p in self.owned())

    def committed(self) -> dict[int, int]:
        wanted = [TopicPartition(TOPIC, p) for p in sorted(self.owned())]
        return {tp.partition: tp.offset for tp in self.consumer.committed(wanted, timeout=WAIT_S)}


def poll_until(members: list[Member], done: object, what: str) -> None:
    assert callable(done)
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for member in members:
            member.poll()


def split_read_and_commit(members: list[Member]) -> None:
    everything = set(range(PARTITIONS))

    def split_and_read() -> bool:
        a, b = (m.owned() for m in members)
        split = a | b == everything and not a & b and bool(a) and bool(b)
        return split and all(m.has_read(BEFORE) for m in members)

    poll_until(members, split_and_read, "two consumers to split the partitions and read them")
    for member in members:
        offsets = [TopicPartition(TOPIC, p, COMMITTED) for p in sorted(member.owned())]
        member.consumer.commit(offsets=offsets, asynchronous=False)


async def describe(host: tuple[str, int]) -> Epochs:
    """The group epoch and each member's epoch, once the coordinator answers."""
    request = ConsumerGroupDescribeRequest(group_ids=(GROUP,))
    with trio.fail_after(WAIT_S):
        while True:
            async with await KafkaConnection.connect(*host, "test") as connection:
                group = (await connection.request(request, 0)).groups[0]
            if group.error_code == ErrorCode.NONE and group.group_state == "Stable":
                return group.group_epoch, {m.member_id: m.member_epoch for m in group.members}
            await trio.sleep(0.2)  # loading, or the members still converging


async def test_consumer_group_members_carry_on_with_their_epochs_after_the_coordinators_host_is_killed(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    hosts = await start_hosts(tmp_path, zookeeper_connect, SETTINGS)
    members: list[Member] = []
    try:
        await trio.to_thread.run_sync(create_and_fill_topic, bootstrap(hosts))
        coordinator = await find_coordinator(address(hosts, 1))
        members = [Member(bootstrap(hosts)) for _ in range(2)]
        await trio.to_thread.run_sync(split_read_and_commit, members)
        before = await describe(address(hosts, coordinator))
        owned_before = [m.owned() for m in members]
        # A member may have read another partition while the group was first settling
        # (it owned it until the second member joined): those records are from before.
        seen_before = [set(m.seen) for m in members]

        hosts[coordinator].process.send_signal(signal.SIGKILL)
        await trio.to_thread.run_sync(hosts[coordinator].process.wait)
        survivors = {n: p for n, p in hosts.items() if n != coordinator}
        successor = await find_coordinator(address(hosts, next(iter(survivors))), coordinator)
        assert successor in survivors

        # The consumers carry on: what is produced now reaches them, on the same
        # partitions, and nothing they had already read comes again.
        await trio.to_thread.run_sync(produce, bootstrap(survivors), BEFORE, AFTER)
        await trio.to_thread.run_sync(
            poll_until,
            members,
            lambda: all(m.has_read(BEFORE + AFTER) for m in members),
            "the consumers to read what was produced after the failover",
        )
        assert [m.owned() for m in members] == owned_before
        for member, earlier in zip(members, seen_before, strict=True):
            assert sorted(member.seen) == sorted(set(member.seen)), f"read twice: {member.seen}"
            expected = {(p, o) for p in member.owned() for o in range(BEFORE + AFTER)}
            assert {r for r in member.seen if r[0] in member.owned()} == expected
            assert set(member.seen) - expected <= earlier, "read a partition it does not own"

        # No member rejoined: the new coordinator has the group at the same epochs.
        after = await describe(address(hosts, successor))
        assert after == before, f"before the kill {before}, after {after}"
        for member in members:
            committed = await trio.to_thread.run_sync(member.committed)
            assert committed == dict.fromkeys(member.owned(), COMMITTED)
    finally:
        for member in members:
            member.consumer.close()
        for process in hosts.values():
            stop_broker_process(process, signal.SIGKILL)
