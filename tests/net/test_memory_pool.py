"""queued.max.request.bytes: Kafka's non-strict memory pool (spec §4.6)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.net.memory_pool import UNBOUNDED_AVAILABLE, MemoryPool


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


def test_allocation_succeeds_while_any_memory_is_left_and_may_overshoot() -> None:
    pool = MemoryPool(100, 80)
    assert pool.try_allocate(60)
    assert pool.try_allocate(80)  # only 40 left, but non-strict
    assert pool.available == -40
    assert pool.used == 140
    assert not pool.try_allocate(1)


def test_allocation_fails_at_exactly_zero_available() -> None:
    pool = MemoryPool(100, 100)
    assert pool.try_allocate(100)
    assert pool.is_out_of_memory
    assert not pool.try_allocate(1)
    pool.release(1)
    assert pool.try_allocate(50)


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
    assert pool.try_allocate(1)
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
