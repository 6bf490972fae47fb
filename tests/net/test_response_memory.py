"""The response budget (broker/net/response_memory.py), sans-IO."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.net.memory_pool import MemoryPool
from broker.net.response_memory import ResponseMemory


def test_a_grant_is_what_is_left_up_to_what_is_wanted() -> None:
    budget = ResponseMemory(100)
    assert budget.grant(60) == 60
    assert budget.grant(60) == 40
    assert budget.grant(10) == 0
    assert budget.used == 100 and budget.available == 0


def test_settling_keeps_what_was_used_and_frees_the_rest() -> None:
    budget = ResponseMemory(100)
    granted = budget.grant(80)
    assert budget.settle(granted, 30) == 30
    assert budget.used == 30 and budget.available == 70


def test_a_first_batch_beyond_the_grant_overdraws_the_budget_until_released() -> None:
    budget = ResponseMemory(100)
    budget.grant(100)
    held = budget.settle(budget.grant(50), 40)  # granted nothing, read one batch
    assert held == 40 and budget.used == 140 and budget.available == 0
    budget.release(held)
    assert budget.used == 100


def test_without_a_limit_everything_is_granted() -> None:
    budget = ResponseMemory(None)
    assert budget.grant(1 << 40) == 1 << 40


def test_releasing_more_than_is_held_is_a_bug() -> None:
    budget = ResponseMemory(100)
    budget.grant(10)
    with pytest.raises(ValueError):
        budget.release(11)


def test_the_memory_pool_gives_responses_a_budget_of_its_own_size() -> None:
    pool = MemoryPool(1000, 1000)
    assert pool.responses.limit == 1000
    pool.responses.grant(1000)
    assert pool.try_allocate(500), "responses do not take request memory"


@given(
    limit=st.integers(min_value=1, max_value=10_000),
    reads=st.lists(
        st.tuples(st.integers(0, 5_000), st.integers(0, 5_000), st.booleans()), max_size=50
    ),
)
def test_the_budget_is_exceeded_by_at_most_one_batch_per_held_response(
    limit: int, reads: list[tuple[int, int, bool]]
) -> None:
    """Each read wants some bytes and reads at most its grant, or one batch when granted
    nothing; some responses are written (released) before the next read."""
    budget = ResponseMemory(limit)
    held: list[tuple[int, bool]] = []  # bytes held, whether granted nothing
    for wanted, batch, written in reads:
        granted = budget.grant(wanted)
        assert granted <= wanted
        used = min(batch, granted) if granted else batch
        held.append((budget.settle(granted, used), granted == 0))
        first_batches = sum(size for size, ungranted in held if ungranted)
        assert budget.used == sum(size for size, _ in held)
        assert budget.used <= limit + first_batches
        if written:
            budget.release(held.pop(0)[0])
    assert budget.used == sum(size for size, _ in held)
