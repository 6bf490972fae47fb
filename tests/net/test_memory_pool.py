"""queued.max.request.bytes: Kafka's non-strict memory pool (spec §4.6)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from broker.net.memory_pool import (
    DEFAULT_POOL_BYTES,
    UNBOUNDED_AVAILABLE,
    MemoryPool,
    pool_size,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_unbounded_pool_reports_long_max_available_and_nothing_used() -> None:
    pool = MemoryPool(-1, 100)
    assert pool.is_unbounded
    assert pool.size is None
    assert pool.try_allocate(10**9)
    assert pool.available == UNBOUNDED_AVAILABLE == 2**63 - 1
    assert pool.used == 0


def test_large_requests_are_granted_strictly_and_leave_the_reserve_alone() -> None:
    pool = MemoryPool(1000, 500)  # reserve 100, small requests up to 6 bytes
    assert (pool.reserve, pool.small_allocation) == (100, 6)
    assert pool.try_allocate(500)
    assert not pool.try_allocate(401)  # would reach into the reserve
    assert pool.try_allocate(400)
    assert pool.used == 900
    assert not pool.try_allocate(7)
    assert pool.try_allocate(6)  # small: the reserve is for it


def test_a_request_larger_than_the_large_lane_is_granted_once_the_lane_is_empty() -> None:
    pool = MemoryPool(100, 100)
    assert pool.try_allocate(100)
    assert pool.is_out_of_memory
    assert not pool.try_allocate(1)
    pool.release(100)
    assert pool.try_allocate(50)
    assert not pool.try_allocate(41)


@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(min_value=0, max_value=400)),
        max_size=60,
    )
)
def test_what_is_granted_never_exceeds_the_pool(steps: list[tuple[bool, int]]) -> None:
    pool = MemoryPool(1000, 400)
    held: list[int] = []
    for allocate, n in steps:
        if allocate:
            if pool.try_allocate(n):
                held.append(n)
        elif held:
            pool.release(held.pop(n % len(held)))
        assert pool.used == sum(held) <= 1000


def test_an_allocation_above_the_single_allocation_limit_is_an_error() -> None:
    with pytest.raises(ValueError, match="largest single allocation"):
        MemoryPool(1000, 10).try_allocate(11)


def test_zero_byte_allocations_always_succeed() -> None:
    pool = MemoryPool(10, 10)
    assert pool.try_allocate(10)
    assert pool.try_allocate(0)


def test_releasing_more_than_allocated_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        MemoryPool(10, 10).release(1)


def test_low_memory_is_below_ten_percent() -> None:
    pool = MemoryPool(100, 100)
    assert pool.try_allocate(90)
    assert not pool.is_low
    pool.release(90)
    assert pool.try_allocate(91)
    assert pool.is_low


async def test_waiters_wake_when_memory_is_released() -> None:
    pool = MemoryPool(100, 100)
    assert pool.try_allocate(100)
    woke = trio.Event()

    async def waiter() -> None:
        await pool.wait_until_available()
        woke.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert not woke.is_set()
        pool.release(1)
        await woke.wait()


async def test_waiting_returns_at_once_when_memory_is_available() -> None:
    pool = MemoryPool(100, 100)
    with trio.fail_after(1):
        await pool.wait_until_available()
    await MemoryPool(-1, 1).wait_until_available()


def test_depleted_time_covers_refusals_until_the_next_successful_allocation() -> None:
    clock = FakeClock()
    pool = MemoryPool(100, 100, clock=clock)
    assert pool.try_allocate(100)
    clock.now = 1.0
    assert not pool.try_allocate(10)
    clock.now = 3.0
    assert pool.depleted_time_s == pytest.approx(2.0)
    pool.release(100)
    clock.now = 4.0
    assert pool.try_allocate(10)
    assert pool.depleted_time_s == pytest.approx(3.0)
    clock.now = 10.0
    assert pool.depleted_time_s == pytest.approx(3.0)
    assert 0.0 < pool.depleted_fraction() <= 1.0


def test_the_default_pool_is_bounded_and_admits_the_largest_frame() -> None:
    assert pool_size(-1, 1000) == DEFAULT_POOL_BYTES
    assert pool_size(0, 2 * DEFAULT_POOL_BYTES) == 2 * DEFAULT_POOL_BYTES
    assert pool_size(5000, 1000) == 5000


async def _allocate_in_order(
    pool: MemoryPool, nursery: trio.Nursery, sizes: list[int], granted: list[int]
) -> None:
    for n in sizes:

        async def take(n: int = n) -> None:
            await pool.allocate(n)
            granted.append(n)

        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()


async def test_waiting_large_requests_are_granted_in_arrival_order() -> None:
    pool = MemoryPool(1000, 900)
    assert pool.try_allocate(900)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        await _allocate_in_order(pool, nursery, [800, 300, 200], granted)
        assert granted == [] and pool.waiting == 3
        pool.release(900)
        await trio.testing.wait_all_tasks_blocked()
        # 800 first; 300 waits for it although 100 bytes of the lane are free.
        assert granted == [800]
        assert not pool.try_allocate(50)  # no queue-jumping either
        pool.release(800)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(granted) == [200, 300, 800]


async def test_a_small_request_is_granted_while_large_ones_wait() -> None:
    pool = MemoryPool(16000, 8000)  # reserve 1600, small requests up to 100 bytes
    assert pool.try_allocate(8000) and pool.try_allocate(6000)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        await _allocate_in_order(pool, nursery, [8000, 8000], granted)
        assert pool.waiting == 2
        with trio.fail_after(1):
            await pool.allocate(100)
        assert granted == []
        pool.release(100)
        pool.release(6000)
        pool.release(8000)
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [8000]
        nursery.cancel_scope.cancel()


async def test_while_a_large_request_waits_small_ones_keep_to_the_reserve() -> None:
    pool = MemoryPool(16000, 14400)  # reserve 1600, small requests up to 100 bytes
    assert pool.try_allocate(5000)
    for _ in range(21):
        assert pool.try_allocate(100)  # no large waiter: the whole pool is theirs
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        await _allocate_in_order(pool, nursery, [9500], granted)
        assert pool.waiting == 1
        # 2100 small bytes are held, more than the reserve: no more small grants.
        assert not pool.try_allocate(100)
        pool.release(5000)
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [9500]
        assert pool.try_allocate(100)  # no large request waits any more


async def test_a_cancelled_waiter_holds_nothing_and_lets_the_next_one_in() -> None:
    pool = MemoryPool(1000, 900)
    assert pool.try_allocate(900)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()
        nursery.start_soon(_cancellable_allocate, pool, 900, scope)
        await trio.testing.wait_all_tasks_blocked()
        await _allocate_in_order(pool, nursery, [500], granted)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert pool.waiting == 1
        pool.release(900)
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [500]
        assert pool.used == 500


async def _cancellable_allocate(pool: MemoryPool, n: int, scope: trio.CancelScope) -> None:
    with scope:
        await pool.allocate(n)
        raise AssertionError("a cancelled waiter was granted")
