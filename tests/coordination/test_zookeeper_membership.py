"""Membership and controller election against a real ZooKeeper server."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from broker.coordination.broker_registration import (
    BrokerEndpoint,
    BrokerRegistration,
    DuplicateBrokerId,
)
from broker.coordination.controller_election import ControllerView
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.membership import ClusterMembership
from broker.coordination.store import (
    CoordinationStore,
    NodeExistsError,
    WatchedChange,
    WatchEvent,
)
from tests.zookeeper_fixture import expire_session

WAIT_S = 30  # generous: the machine may be loaded; nothing waits this long when all is well


def store_for(connect: str) -> KazooCoordinationStore:
    return KazooCoordinationStore(
        ZooKeeperSettings(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    )


def registration(node_id: int, rack: str | None = None) -> BrokerRegistration:
    endpoints = (
        BrokerEndpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092 + node_id),
        BrokerEndpoint("SECURE", "SASL_SSL", "127.0.0.1", 19092 + node_id),
    )
    return BrokerRegistration(node_id, endpoints, rack=rack)


async def bound() -> None:
    """The listeners of these brokers are bound at once."""


def membership(
    connect: str, node_id: int, rack: str | None = None, store: CoordinationStore | None = None
) -> ClusterMembership:
    return ClusterMembership(
        store or store_for(connect), node_id, lambda: registration(node_id, rack), bound
    )


@asynccontextmanager
async def connected(connect: str) -> AsyncIterator[CoordinationStore]:
    store = store_for(connect)
    await store.connect()
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def running(member: ClusterMembership) -> AsyncIterator[trio.CancelScope]:
    """Run a membership; cancelling the scope it gives ends its session."""
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[None]) -> None:
            with scope:
                await member.run(task_status=task_status)

        await nursery.start(run)
        with trio.fail_after(WAIT_S):
            await member.registered.wait()
        yield scope
        nursery.cancel_scope.cancel()


async def test_a_registration_is_kafkas_json_under_a_created_chroot(
    zookeeper_connect: str,
) -> None:
    hosts, chroot = zookeeper_connect.split("/", 1)
    async with running(membership(zookeeper_connect, 1, rack="rack-a")), connected(hosts) as root:
        node = await root.get(f"/{chroot}/brokers/ids/1")
        assert node is not None
        document = json.loads(node.data)
        assert document["version"] == 4
        assert (document["host"], document["port"]) == ("127.0.0.1", 9093)
        assert document["endpoints"] == ["PLAINTEXT://127.0.0.1:9093", "SECURE://127.0.0.1:19093"]
        assert document["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT",
            "SECURE": "SASL_SSL",
        }
        assert document["rack"] == "rack-a"
        assert document["jmx_port"] == -1
        assert int(document["timestamp"]) > 0
        assert BrokerRegistration.from_json(1, node.data).endpoints == registration(1).endpoints
    async with connected(hosts) as root:  # the session ended: the ephemeral znode is gone
        assert await root.get(f"/{chroot}/brokers/ids/1") is None
        assert await root.children(f"/{chroot}/brokers/ids") == []


async def test_a_second_broker_with_the_same_id_is_refused(zookeeper_connect: str) -> None:
    async with running(membership(zookeeper_connect, 7)):
        with pytest.raises(DuplicateBrokerId) as refused, trio.fail_after(WAIT_S):
            await membership(zookeeper_connect, 7).run()
    message = str(refused.value)
    assert "node.id 7" in message and "/brokers/ids/7" in message
    assert "\n" not in message


async def test_one_controller_is_elected_and_another_takes_over_when_its_session_ends(
    zookeeper_connect: str,
) -> None:
    members = {1: membership(zookeeper_connect, 1), 2: membership(zookeeper_connect, 2)}
    async with running(members[1]) as scope_1, running(members[2]) as scope_2:
        scopes = {1: scope_1, 2: scope_2}
        with trio.fail_after(WAIT_S):
            for member in members.values():
                await member.live_brokers.brokers.wait_value(lambda b: set(b) == {1, 2})
                await member.election.view.wait_value(lambda v: v.controller_id != -1)
        controller_id = members[1].election.view.value.controller_id
        other_id = 3 - controller_id
        assert members[controller_id].election.view.value == ControllerView(controller_id, 1)
        assert members[other_id].election.view.value == ControllerView(controller_id, 0)
        assert members[controller_id].election.is_controller
        assert not members[other_id].election.is_controller
        async with connected(zookeeper_connect) as store:
            epoch = await store.get("/controller_epoch")
            assert epoch is not None and epoch.data == b"1"
            controller = await store.get("/controller")
            assert controller is not None
            document = json.loads(controller.data)
            assert (document["version"], document["brokerid"]) == (1, controller_id)
            assert int(document["timestamp"]) > 0

            scopes[controller_id].cancel()  # its session is closed: /controller goes with it
            other = members[other_id]
            with trio.fail_after(WAIT_S):
                await other.election.view.wait_value(lambda v: v.controller_id == other_id)
                await other.live_brokers.brokers.wait_value(lambda b: set(b) == {other_id})
            assert other.election.view.value == ControllerView(other_id, 2)
            epoch = await store.get("/controller_epoch")
            assert epoch is not None and epoch.data == b"2"


async def test_watches_are_delivered_into_trio(zookeeper_connect: str) -> None:
    send, receive = trio.open_memory_channel[WatchEvent](math.inf)
    async with connected(zookeeper_connect) as watcher, connected(zookeeper_connect) as writer:
        await watcher.ensure_path("/watched")
        assert await watcher.get("/watched/a", watch=send) is None
        assert await watcher.children("/watched", watch=send) == []
        await writer.create("/watched/a", b"x")
        with pytest.raises(NodeExistsError):
            await writer.create("/watched/a", b"y")
        with trio.fail_after(WAIT_S):
            events = {await receive.receive(), await receive.receive()}
        assert events == {
            WatchEvent("/watched/a", WatchedChange.CREATED),
            WatchEvent("/watched", WatchedChange.CHILDREN_CHANGED),
        }
        node = await watcher.get("/watched/a", watch=send)
        assert node is not None and node.data == b"x"
        assert await writer.set("/watched/a", b"z", version=node.version) == node.version + 1
        with trio.fail_after(WAIT_S):
            assert await receive.receive() == WatchEvent("/watched/a", WatchedChange.DATA_CHANGED)


async def test_a_broker_whose_session_expired_registers_again_and_is_re_elected(
    zookeeper_connect: str,
) -> None:
    store = store_for(zookeeper_connect)
    member = membership(zookeeper_connect, 3, store=store)
    async with running(member), connected(zookeeper_connect) as observer:
        with trio.fail_after(WAIT_S):
            await member.election.view.wait_value(lambda v: v == ControllerView(3, 1))
        first_registration = await observer.get("/brokers/ids/3")
        assert first_registration is not None
        session = store._client.client_id  # fault injection needs the engine's session
        await trio.to_thread.run_sync(expire_session, zookeeper_connect.split("/")[0], session)
        with trio.fail_after(WAIT_S):
            await member.election.view.wait_value(lambda v: v == ControllerView(3, 2))
        again = await observer.get("/brokers/ids/3")
        assert again is not None and again.data != first_registration.data
        assert store._client.client_id != session
        epoch = await observer.get("/controller_epoch")
        assert epoch is not None and epoch.data == b"2"


async def test_znodes_another_tool_wrote_badly_are_ignored_not_fatal(
    zookeeper_connect: str,
) -> None:
    async with connected(zookeeper_connect) as tool:
        await tool.ensure_path("/brokers/ids")
        await tool.create("/brokers/ids/99", b"not json")
        await tool.create("/brokers/ids/zz", b"{}")
        await tool.create("/controller_epoch", b"garbage")
        member = membership(zookeeper_connect, 4)
        async with running(member):
            with trio.fail_after(WAIT_S):
                await member.live_brokers.brokers.wait_value(lambda b: set(b) == {4})
            # The epoch cannot be read, so nobody is elected; once repaired, the next
            # change of /controller elects.
            assert member.election.view.value.controller_id == -1
            await tool.set("/controller_epoch", b"7")
            await tool.create("/controller", b'{"version":1,"brokerid":99,"timestamp":"0"}')
            await tool.delete("/controller")
            with trio.fail_after(WAIT_S):
                await member.election.view.wait_value(lambda v: v == ControllerView(4, 8))
