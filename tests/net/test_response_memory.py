"""The response budget (broker/net/response_memory.py), sans-IO."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.net.memory_pool import MemoryPool
from broker.net.request import ClientInformation, Request, RequestContext
from broker.net.response_memory import MIN_GRANT, ResponseMemory
from broker.protocol.api import RequestHeader


def test_a_grant_is_what_is_left_up_to_what_is_wanted() -> None:
    limit = 4 * MIN_GRANT
    budget = ResponseMemory(limit)
    assert budget.grant(3 * MIN_GRANT) == 3 * MIN_GRANT
    assert budget.grant(3 * MIN_GRANT) == MIN_GRANT
    assert budget.used == limit and budget.available == 0


def test_an_exhausted_budget_still_grants_the_floor() -> None:
    budget = ResponseMemory(MIN_GRANT)
    budget.grant(MIN_GRANT)
    assert budget.grant(10) == 10
    assert budget.grant(5 * MIN_GRANT) == MIN_GRANT
    assert budget.used == 2 * MIN_GRANT + 10 and budget.available == 0


def test_settling_keeps_what_was_used_and_frees_the_rest() -> None:
    budget = ResponseMemory(100)
    granted = budget.grant(80)
    assert budget.settle(granted, 30) == 30
    assert budget.used == 30 and budget.available == 70


def test_a_first_batch_beyond_the_grant_overdraws_the_budget_until_released() -> None:
    budget = ResponseMemory(100)
    held = budget.settle(budget.grant(50), 3 * MIN_GRANT)  # one batch above the grant
    assert held == 3 * MIN_GRANT and budget.used == held and budget.available == 0
    budget.release(held)
    assert budget.used == 0


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
    limit=st.integers(min_value=1, max_value=8 * MIN_GRANT),
    reads=st.lists(
        st.tuples(st.integers(0, 4 * MIN_GRANT), st.integers(0, 2 * MIN_GRANT), st.booleans()),
        max_size=50,
    ),
)
def test_the_budget_is_exceeded_by_at_most_the_floor_or_a_batch_per_held_response(
    limit: int, reads: list[tuple[int, int, bool]]
) -> None:
    """Each read wants some bytes and reads its first batch, then whole batches of the
    same size within its grant; some responses are written (released) before the next."""
    budget = ResponseMemory(limit)
    held: list[int] = []
    largest_batch = 0
    for wanted, batch, written in reads:
        granted = budget.grant(wanted)
        assert min(wanted, MIN_GRANT) <= granted <= wanted
        used = batch if batch > granted else granted // batch * batch if batch else 0
        largest_batch = max(largest_batch, batch)
        held.append(budget.settle(granted, used))
        assert budget.used == sum(held)
        assert budget.used <= limit + len(held) * max(MIN_GRANT, largest_batch)
        if written:
            budget.release(held.pop(0))
    assert budget.used == sum(held)


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
    budget = ResponseMemory(4 * MIN_GRANT)
    request = _request(budget)
    assert request.reserve_response_memory(3 * MIN_GRANT) == 3 * MIN_GRANT
    request.keep_response_memory(300)
    assert budget.used == 300
    request.release_memory()
    request.release_memory()
    assert budget.used == 0


def test_reading_again_replaces_the_earlier_reservation() -> None:
    budget = ResponseMemory(2 * MIN_GRANT)
    request = _request(budget)
    request.reserve_response_memory(2 * MIN_GRANT)
    request.keep_response_memory(2 * MIN_GRANT)
    assert request.reserve_response_memory(2 * MIN_GRANT) == 2 * MIN_GRANT, (
        "its own earlier read is given back"
    )
    request.keep_response_memory(0)
    assert budget.used == 0


def test_a_read_after_its_connection_closed_is_not_counted() -> None:
    budget = ResponseMemory(4 * MIN_GRANT)
    request = _request(budget)
    request.reserve_response_memory(MIN_GRANT)
    request.release_memory()  # the connection closed while a long poll waits
    request.reserve_response_memory(MIN_GRANT)
    request.keep_response_memory(MIN_GRANT)
    request.release_memory()
    assert budget.used == 0
