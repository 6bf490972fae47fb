"""The response budget (broker/net/response_memory.py), sans-IO."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.net.memory_pool import MemoryPool
from broker.net.request import ClientInformation, Request, RequestContext
from broker.net.response_memory import ResponseMemory
from broker.protocol.api import RequestHeader


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


def _request(budget: ResponseMemory) -> Request:
    context = RequestContext(
        connection_id="c",
        processor_id=0,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        client_address="127.0.0.1",
        client_port=1,
        client_information=ClientInformation(),
    )
    header = RequestHeader(api_key=1, api_version=11, correlation_id=1, client_id="t")
    return Request(header=header, body=None, context=context, size_bytes=0, response_memory=budget)


def test_a_request_holds_what_its_response_read_until_released_once() -> None:
    budget = ResponseMemory(1000)
    request = _request(budget)
    assert request.reserve_response_memory(800) == 800
    request.keep_response_memory(300)
    assert budget.used == 300
    request.release_memory()
    request.release_memory()
    assert budget.used == 0


def test_reading_again_replaces_the_earlier_reservation() -> None:
    budget = ResponseMemory(1000)
    request = _request(budget)
    request.reserve_response_memory(600)
    request.keep_response_memory(600)
    assert request.reserve_response_memory(1000) == 1000, "its own earlier read is given back"
    request.keep_response_memory(0)
    assert budget.used == 0
