"""The memory pool serves waiters fairly (issue 22, item 1).

With 30 connections sending frames close to the pool's size, a well-behaved client
waited 20 s: when a frame as large as the pool was released, the pool handed the memory
to the next large frame before an earlier small request, and a frame larger than the
large lane took the reserve meant for small requests.
"""

from __future__ import annotations

import attrs
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.net.memory_pool import MemoryPool


async def _allocate(pool: MemoryPool, n: int, granted: list[int]) -> None:
    await pool.allocate(n)
    granted.append(n)


async def test_a_small_request_that_arrived_first_is_served_before_a_later_large_one() -> None:
    pool = MemoryPool(50_000_000, 50_000_000)
    big = 49_999_999
    assert pool.try_allocate(big)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_allocate, pool, 40, granted)  # small, arrives first
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(_allocate, pool, big, granted)  # large, arrives second
        await trio.testing.wait_all_tasks_blocked()
        pool.release(big)
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [40, big]


async def test_an_oversized_frame_cannot_take_the_reserve_meant_for_small_requests() -> None:
    pool = MemoryPool(50_000_000, 50_000_000)  # reserve 5 MB, small up to 312,500 B
    assert pool.try_allocate(49_999_999)
    small = pool.small_allocation
    granted = [small for _ in range(pool.reserve // small) if pool.try_allocate(small)]
    assert len(granted) == pool.reserve // small, "the whole reserve, pool or no pool"
    assert not pool.try_allocate(small), "but no more than the reserve"
    assert pool.used <= pool.size + pool.reserve  # type: ignore[operator]


@attrs.define
class _Ask:
    """One allocation of the model run: when it arrived, and what became of it."""

    arrival: int
    size: int
    small: bool
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    granted_at: int | None = None
    released: bool = False
    cancelled: bool = False


SIZE = 1000  # reserve 100, small requests up to 6 bytes, large lane 900


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("allocate"), st.sampled_from([1, 3, 6, 7, 90, 300, 600, 950, 999, 1000])
            ),
            st.tuples(st.just("release"), st.integers(0, 50)),
            st.tuples(st.just("cancel"), st.integers(0, 50)),
        ),
        max_size=40,
    )
)
def test_waiters_are_served_first_come_first_served_within_the_pool_and_its_reserve(
    steps: list[tuple[str, int]],
) -> None:
    """After every step: no waiter that fits is left waiting; each lane is granted in
    arrival order; a small request waits only while small requests hold its reserve;
    memory stays within the pool, or within the pool and its reserve while a frame
    larger than the large lane holds memory."""

    async def main() -> None:
        pool = MemoryPool(SIZE, SIZE)
        lane = SIZE - pool.reserve
        asks: list[_Ask] = []
        grants = 0

        async def allocate(ask: _Ask) -> None:
            nonlocal grants
            with ask.scope:
                await pool.allocate(ask.size)
                grants += 1
                ask.granted_at = grants
                return
            ask.cancelled = True

        async with trio.open_nursery() as nursery:
            for action, value in steps:
                held = [a for a in asks if a.granted_at is not None and not a.released]
                waiting = [a for a in asks if a.granted_at is None and not a.cancelled]
                if action == "allocate":
                    asks.append(_Ask(len(asks), value, pool.is_small(value)))
                    nursery.start_soon(allocate, asks[-1])
                elif action == "release" and held:
                    ask = held[value % len(held)]
                    ask.released = True
                    pool.release(ask.size)
                elif action == "cancel" and waiting:
                    waiting[value % len(waiting)].scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                check(pool, asks, lane)
            nursery.cancel_scope.cancel()

    trio.run(main)


def check(pool: MemoryPool, asks: list[_Ask], lane: int) -> None:
    held = [a for a in asks if a.granted_at is not None and not a.released]
    waiting = [a for a in asks if a.granted_at is None and not a.cancelled]
    assert pool.used == sum(a.size for a in held)
    oversized = any(a.size > lane for a in held)
    assert pool.used <= SIZE + (pool.reserve if oversized else 0)
    for small in (True, False):
        granted = sorted((a for a in asks if a.small == small and a.granted_at), key=_granted)
        assert [a.arrival for a in granted] == sorted(a.arrival for a in granted), "FIFO"
        lane_waiting = [a for a in waiting if a.small == small]
        if lane_waiting:
            first = min(lane_waiting, key=lambda a: a.arrival)
            later = [a.arrival for a in granted if a.arrival > first.arrival]
            assert not later, "nothing later in its lane is granted while it waits"
            assert not pool._fits(first.size), "a waiter that fits is left waiting"
    small_waiting = [a for a in waiting if a.small]
    if small_waiting:
        small_held = sum(a.size for a in held if a.small)
        first = min(small_waiting, key=lambda a: a.arrival)
        assert small_held + first.size > pool.reserve, "its reserve was taken by large ones"


def _granted(ask: _Ask) -> int:
    return ask.granted_at or 0
