"""A group's committed offsets and generation survive the loss of its coordinator's host:
three `broker serve` hosts on 127.0.0.2-4 with a real ZooKeeper, the coordinator (the
leader of `__consumer_offsets`-0) killed with SIGKILL, the group carrying on with a
survivor that loaded the state from its replica of the partition."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from pathlib import Path

import trio
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from broker.client.connection import KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    MetadataRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from broker.protocol.messages.leave_group_request import MemberIdentity
from broker.protocol.messages.offset_fetch_request import OffsetFetchRequestTopic
from broker.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from tests.cluster.test_group_membership_restart import (
    GROUP,
    RETRIABLE,
    TOPIC,
    commit_request,
    join_request,
)
from tests.hosts.test_hosts_cluster import HOSTS, WAIT_S
from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)
from tests.interop.kafka_clients import admin

COMMITTED = 5
RECORDS = 10


def start_host(
    tmp_path: Path, node_id: int, zookeeper: str, extra: Mapping[str, str] | None = None
) -> BrokerProcess:
    address, rack = HOSTS[node_id]
    overrides = {
        "listeners": f"PLAINTEXT://{address}:0",
        "node.id": str(node_id),
        "broker.rack": rack,
        "zookeeper.connect": zookeeper,
        "zookeeper.session.timeout.ms": "6000",
        "cluster.id": "internal-state-test",
        "num.network.threads": "1",
        "num.io.threads": "2",
        "group.initial.rebalance.delay.ms": "0",
        **(extra or {}),
    }
    return start_broker_process(tmp_path / f"host-{node_id}", overrides, timeout_s=WAIT_S)


def address(hosts: dict[int, BrokerProcess], node_id: int) -> tuple[str, int]:
    return HOSTS[node_id][0], hosts[node_id].port


def bootstrap(hosts: dict[int, BrokerProcess]) -> str:
    return ",".join("{}:{}".format(*address(hosts, n)) for n in hosts)


def create_and_fill_topic(servers: str) -> None:
    client = admin(servers)
    futures = client.create_topics([NewTopic(TOPIC, 1, 3)], request_timeout=20)
    futures[TOPIC].result(timeout=WAIT_S)
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, str(i).encode(), partition=0)
    assert producer.flush(WAIT_S) == 0


async def start_hosts(
    tmp_path: Path, zookeeper: str, extra: Mapping[str, str] | None = None
) -> dict[int, BrokerProcess]:
    """Every host started at once and registered (those started are stopped again when
    another fails)."""
    hosts: dict[int, BrokerProcess] = {}

    async def start(node_id: int) -> None:
        hosts[node_id] = await trio.to_thread.run_sync(
            start_host, tmp_path, node_id, zookeeper, extra
        )

    try:
        async with trio.open_nursery() as nursery:
            for node_id in HOSTS:
                nursery.start_soon(start, node_id)
        hosts = dict(sorted(hosts.items()))
        await wait_for_registrations(hosts)
    except BaseException:
        for process in hosts.values():
            stop_broker_process(process, signal.SIGKILL)
        raise
    return hosts


async def find_coordinator(host: tuple[str, int], avoid: int | None = None) -> int:
    """The group's coordinator as `host` names it, once it names a live one."""
    request = FindCoordinatorRequest(key=GROUP, key_type=0)
    with trio.fail_after(WAIT_S):
        while True:
            async with await KafkaConnection.connect(*host, "test") as connection:
                answer = await connection.request(request, 3)
            if answer.error_code == ErrorCode.NONE and answer.node_id != avoid:
                return int(answer.node_id)
            await trio.sleep(0.1)


async def wait_for_registrations(hosts: dict[int, BrokerProcess]) -> None:
    """Every host registered in ZooKeeper (after its listeners, so after "started")."""
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    with trio.fail_after(WAIT_S):
        for node_id in hosts:
            async with await KafkaConnection.connect(*address(hosts, node_id), "test") as c:
                while len((await c.request(request, 9)).brokers) < len(HOSTS):  # noqa: ASYNC110 - registrations arrive when they do
                    await trio.sleep(0.1)


async def join_sync_and_commit(host: tuple[str, int]) -> tuple[str, int]:
    async with await KafkaConnection.connect(*host, "test") as connection:
        with trio.fail_after(WAIT_S):
            # The coordinator named may still be loading its `__consumer_offsets` leadership.
            while (first := await connection.request(join_request(""), 5)).error_code in RETRIABLE:  # noqa: ASYNC110 - the load ends when it does
                await trio.sleep(0.1)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await connection.request(join_request(first.member_id), 5)
        assert joined.error_code == ErrorCode.NONE
        member, generation = joined.member_id, joined.generation_id
        assignment = SyncGroupRequestAssignment(member_id=member, assignment=b"a")
        synced = await connection.request(
            SyncGroupRequest(
                group_id=GROUP,
                generation_id=generation,
                member_id=member,
                assignments=(assignment,),
            ),
            3,
        )
        assert synced.error_code == ErrorCode.NONE
        committed = await connection.request(commit_request(generation, member, COMMITTED), 7)
        assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
        return member, generation


async def carry_on(host: tuple[str, int], member: str, generation: int) -> tuple[ErrorCode, int]:
    """The member's heartbeat to the new coordinator once it has loaded the group, and
    the offset it reports; then the member leaves (as a consumer closing would)."""
    heartbeat = HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member)
    async with await KafkaConnection.connect(*host, "test") as connection:
        with trio.fail_after(WAIT_S):
            while True:
                beat = ErrorCode((await connection.request(heartbeat, 4)).error_code)
                if beat not in RETRIABLE:
                    break
                await trio.sleep(0.1)  # the new leader loads the group when it does
        fetch = OffsetFetchRequest(
            group_id=GROUP,
            topics=(OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),),
        )
        fetched = await connection.request(fetch, 5)
        assert fetched.error_code == ErrorCode.NONE
        offset = fetched.topics[0].partitions[0].committed_offset
        leave = LeaveGroupRequest(group_id=GROUP, members=(MemberIdentity(member_id=member),))
        assert (await connection.request(leave, 3)).error_code == ErrorCode.NONE
    return beat, int(offset)


def consume_remaining(servers: str) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    got: list[tuple[int, bytes]] = []
    try:
        for _ in range(WAIT_S * 10):
            message = consumer.poll(0.1)
            if message is None:
                if len(got) >= RECORDS - COMMITTED:
                    break
                continue
            assert message.error() is None, message.error()
            got.append((message.offset() or 0, message.value() or b""))
    finally:
        consumer.close()
    return got


async def test_offsets_and_generation_survive_the_coordinators_host_killed(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    hosts = await start_hosts(tmp_path, zookeeper_connect)
    try:
        await trio.to_thread.run_sync(create_and_fill_topic, bootstrap(hosts))
        coordinator = await find_coordinator(address(hosts, 1))
        member, generation = await join_sync_and_commit(address(hosts, coordinator))

        hosts[coordinator].process.send_signal(signal.SIGKILL)
        await trio.to_thread.run_sync(hosts[coordinator].process.wait)
        survivors = {n: p for n, p in hosts.items() if n != coordinator}
        survivor = next(iter(survivors))
        successor = await find_coordinator(address(hosts, survivor), avoid=coordinator)
        assert successor in survivors
        beat, offset = await carry_on(address(hosts, successor), member, generation)
        assert (beat, offset) == (ErrorCode.NONE, COMMITTED)

        # A real consumer of the group, on the survivors, resumes at the committed offset.
        resumed = await trio.to_thread.run_sync(consume_remaining, bootstrap(survivors))
        assert resumed == [(i, str(i).encode()) for i in range(COMMITTED, RECORDS)]
    finally:
        for process in hosts.values():
            stop_broker_process(process, signal.SIGKILL)
