"""Watches on a real ZooKeeper: a znode read again before its watch fired keeps one
watch, so one change is one event (the partition-state view re-reads a topic's state
znodes on every assignment change; each re-read used to add a watch, and each change
then came back once per read)."""

from __future__ import annotations

import trio

from broker.coordination.store import WatchedChange, WatchEvent
from tests.coordination.test_zookeeper_membership import WAIT_S, connected


async def test_a_znode_read_twice_with_one_sink_delivers_one_event_per_change(
    zookeeper_connect: str,
) -> None:
    async with connected(zookeeper_connect) as store:
        await store.create("/watched", b"1")
        await store.create("/barrier", b"1")
        events_in, events = trio.open_memory_channel[WatchEvent](16)
        for _ in range(3):
            assert await store.get("/watched", watch=events_in) is not None
        await store.set("/watched", b"2")
        with trio.fail_after(WAIT_S):
            assert await events.receive() == WatchEvent("/watched", WatchedChange.DATA_CHANGED)
        # ZooKeeper delivers a session's events in order: once the barrier's event is
        # here, every event of the first change has been delivered too.
        await store.get("/barrier", watch=events_in)
        await store.set("/barrier", b"2")
        with trio.fail_after(WAIT_S):
            assert await events.receive() == WatchEvent("/barrier", WatchedChange.DATA_CHANGED)
        assert events.statistics().current_buffer_used == 0


async def test_each_sink_of_a_znode_hears_its_change(zookeeper_connect: str) -> None:
    async with connected(zookeeper_connect) as store:
        await store.create("/shared", b"1")
        first_in, first = trio.open_memory_channel[WatchEvent](4)
        second_in, second = trio.open_memory_channel[WatchEvent](4)
        await store.get("/shared", watch=first_in)
        await store.children("/shared", watch=second_in)
        await store.get("/shared", watch=second_in)
        await store.set("/shared", b"2")
        with trio.fail_after(WAIT_S):
            assert (await first.receive()).path == "/shared"
            assert (await second.receive()).change is WatchedChange.DATA_CHANGED
