"""A broker stopped gracefully hands its leaderships over first (Kafka 2.x's controlled
shutdown), and leads again once it is back and in sync (preferred-leader election).

Three in-process brokers on 127.0.0.2-4 and a real ZooKeeper; a real idempotent
producer (confluent-kafka, acks=all) writes through the shutdown and the return."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path

import attrs
import pytest
import trio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.connection import KafkaConnection
from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse
from broker.server import KafkaServer
from tests.hosts.test_hosts_cluster import (
    HOSTS,
    WAIT_S,
    bootstrap,
    consume,
    metadata,
    running_host,
    wait_for_metadata,
)
from tests.hosts.test_hosts_isr import produce_to, replica_log

MAX_RECORDS = 20_000  # the producer's bound; it stops far earlier when told
EXTRA = {
    # The controller checks the leader imbalance every second (Kafka: 300).
    "leader.imbalance.check.interval.seconds": "1",
}


@attrs.define
class ProducerRun:
    """What the producer thread saw: every value sent, acknowledged (with its offset
    and when) or failed."""

    stop: threading.Event = attrs.field(factory=threading.Event)
    sent: list[bytes] = attrs.field(factory=list)
    acked: list[tuple[float, bytes, int]] = attrs.field(factory=list)
    errors: list[str] = attrs.field(factory=list)
    unflushed: int = -1

    def longest_ack_gap_s(self) -> float:
        times = sorted(t for t, _value, _offset in self.acked)
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def produce_until_stopped(
    servers: str, topic: str, partition: int, run: ProducerRun, prefix: str = "record"
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
    )

    def on_delivery(error: object, message: object) -> None:
        if error is not None:
            run.errors.append(str(error))
        else:
            run.acked.append((time.monotonic(), message.value(), message.offset()))  # type: ignore[attr-defined]

    for i in range(MAX_RECORDS):
        if run.stop.is_set():
            break
        value = f"{prefix}-{i:06d}".encode()
        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
        run.sent.append(value)
        producer.poll(0.002)
    run.unflushed = producer.flush(WAIT_S)


def create_topic(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    new = NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(timeout=WAIT_S)


async def controlled_shutdown_request(
    controller: KafkaServer, broker_id: int, broker_epoch: int
) -> ControlledShutdownResponse:
    async with await KafkaConnection.connect(
        HOSTS[controller.node_id][0], controller.bound_port(), "test"
    ) as connection:
        request = ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch)
        response: ControlledShutdownResponse = await connection.request(request, 3)
        return response


async def wait_for_acks(run: ProducerRun, count: int) -> None:
    with trio.fail_after(WAIT_S):
        while len(run.acked) < count:  # noqa: ASYNC110 - a producer thread's progress
            await trio.sleep(0.05)


async def test_a_leader_stopped_gracefully_hands_over_first_and_leads_again_once_back(
    tmp_path: Path, zookeeper_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    topic = "moving"
    async with AsyncExitStack() as stack:
        servers = {
            node_id: await stack.enter_async_context(
                running_host(tmp_path, node_id, zookeeper_connect, EXTRA)
            )
            for node_id in HOSTS
        }
        first = servers[1]
        await wait_for_metadata(first, None, lambda r: len(r.brokers) == 3 and r.controller_id > 0)
        await trio.to_thread.run_sync(create_topic, bootstrap(first), topic)
        response = await wait_for_metadata(
            first, topic, lambda r: all(p.leader_id > 0 for p in r.topics[0].partitions)
        )
        # A partition led by a broker that is not the controller, so the broker asks the
        # controller over the wire (ControlledShutdown, key 7).
        partition = next(
            p for p in response.topics[0].partitions if p.leader_id != response.controller_id
        )
        index, leaving = partition.partition_index, partition.leader_id
        assert partition.replica_nodes[0] == leaving  # the preferred replica leads
        # A partition it follows (RF 3 on three hosts): acks=all there waits for it while
        # the ISR names it.
        followed = next(
            p.partition_index for p in response.topics[0].partitions if p.leader_id != leaving
        )
        survivor = servers[next(n for n in HOSTS if n != leaving)]
        everyone = ",".join(bootstrap(s) for s in servers.values())

        run, followed_run = ProducerRun(), ProducerRun()
        produced = trio.Event()

        async def produce() -> None:
            await trio.to_thread.run_sync(produce_until_stopped, everyone, topic, index, run)
            produced.set()

        async def produce_followed() -> None:
            await trio.to_thread.run_sync(
                produce_until_stopped, everyone, topic, followed, followed_run, "followed"
            )

        # A ControlledShutdown from an older registration of the broker (a lower broker
        # epoch than its registration's czxid) is refused, and moves nothing.
        deployment = servers[leaving].deployment
        assert isinstance(deployment, ZooKeeperDeployment)
        epoch = deployment.live_brokers.brokers.value[leaving].broker_epoch
        assert epoch > 0
        stale = await controlled_shutdown_request(
            servers[response.controller_id], leaving, epoch - 1
        )
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert (await metadata(survivor, topic)).topics[0].partitions[index].leader_id == leaving

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            nursery.start_soon(produce_followed)
            await wait_for_acks(run, 200)
            await wait_for_acks(followed_run, 200)

            # The leader stops gracefully while the producer writes.
            servers[leaving].shutdown()
            with trio.fail_after(WAIT_S):
                await servers[leaving].stopped.wait()
            moved = await wait_for_metadata(
                survivor, topic, lambda r: r.topics[0].partitions[index].leader_id != leaving
            )
            state = moved.topics[0].partitions[index]
            assert state.leader_id in set(HOSTS) - {leaving}
            assert leaving not in state.isr_nodes
            await wait_for_acks(run, len(run.acked) + 200)

            # It comes back, catches up into the ISR and leads again (preferred leader).
            async with running_host(tmp_path, leaving, zookeeper_connect, EXTRA):
                back = await wait_for_metadata(
                    survivor, topic, lambda r: r.topics[0].partitions[index].leader_id == leaving
                )
                assert leaving in back.topics[0].partitions[index].isr_nodes
                await wait_for_acks(run, len(run.acked) + 200)
                run.stop.set()
                followed_run.stop.set()
                with trio.fail_after(WAIT_S + 5):
                    await produced.wait()
                # No error reached the producer; every record is acknowledged once, in
                # order, and the returned leader serves them all.
                assert run.errors == [] and run.unflushed == 0
                acked = sorted(run.acked, key=lambda a: a[2])
                assert [value for _t, value, _offset in acked] == run.sent
                assert len({offset for _t, _value, offset in acked}) == len(acked)
                # The topic read back: this partition's log is every record, in order.
                count = len(run.sent) + len(followed_run.sent)
                read = await trio.to_thread.run_sync(consume, everyone, topic, count)
                assert [value for value in read if value.startswith(b"record-")] == run.sent

        # The handover happened before the broker's listeners closed, through the
        # controller's ControlledShutdown, with nothing left to the broker's failure.
        messages = [r.getMessage() for r in caplog.records]
        moved_at = messages.index(
            "controlled shutdown succeeded: leadership moved to other replicas"
        )
        closing_at = next(
            i for i, m in enumerate(messages) if m.startswith("shutting down: no new connections")
        )
        assert moved_at < closing_at
        assert f"controlled shutdown asked by broker {leaving}" in messages
        assert deployment.controlled_shutdown.remaining == []
        print(f"longest gap between acknowledgements: {run.longest_ack_gap_s():.3f} s")
        assert run.longest_ack_gap_s() < 5  # loose: the 2-core machine is shared
        # The partition it followed never waited for a replica that had stopped fetching
        # (it fetched until the controller took it out of the ISR): no stall near the
        # goal of a rolling restart. Before, 0.1-1.6 s here, often above the goal.
        print(f"followed partition: longest gap {followed_run.longest_ack_gap_s():.3f} s")
        assert followed_run.errors == [] and followed_run.unflushed == 0
        assert followed_run.longest_ack_gap_s() < 1.0


async def test_an_acks_all_produce_waiting_on_a_follower_that_leaves_is_answered_by_its_leader(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    topic = "waiting"
    async with AsyncExitStack() as stack:
        servers = {
            node_id: await stack.enter_async_context(
                running_host(tmp_path, node_id, zookeeper_connect)
            )
            for node_id in HOSTS
        }
        first = servers[1]
        await wait_for_metadata(first, None, lambda r: len(r.brokers) == 3)
        deployment = first.deployment
        assert isinstance(deployment, ZooKeeperDeployment)
        await deployment.log_manager.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
        response = await wait_for_metadata(
            first, topic, lambda r: r.topics and r.topics[0].partitions[0].leader_id > 0
        )
        leader_id = response.topics[0].partitions[0].leader_id
        leader = servers[leader_id]
        leaving = next(n for n in HOSTS if n != leader_id)
        leading = leader.deployment
        assert isinstance(leading, ZooKeeperDeployment)
        with trio.fail_after(WAIT_S):
            while leading.replication.leader(topic, 0) is None:  # noqa: ASYNC110 - ZooKeeper's watches
                await trio.sleep(0.05)

        # A follower that stopped fetching holds an acks=all produce back ...
        follower = servers[leaving].deployment
        assert isinstance(follower, ZooKeeperDeployment)
        follower.replica_fetchers.stop()
        answers = []

        async def produce_one() -> None:
            answers.append(await produce_to(leader, topic, [b"held"], acks=-1))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce_one)
            with trio.fail_after(WAIT_S):
                while replica_log(leader, topic).log_end_offset < 1:  # noqa: ASYNC110 - the append
                    await trio.sleep(0.02)
            assert answers == []
            # ... until its controlled shutdown takes it out of the ISR: the leader stays
            # (the next epoch) and answers the waiting produce itself.
            servers[leaving].shutdown()
        assert answers[0].error_code == ErrorCode.NONE
        state = (await metadata(leader, topic)).topics[0].partitions[0]
        assert state.leader_id == leader_id and state.leader_epoch == 1
        assert leaving not in state.isr_nodes
