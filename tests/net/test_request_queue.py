"""The request queue's policy (sans-IO): small requests first, large ones never starved,
a bounded number of large requests in service, each lane in arrival order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.net.request_queue import RequestQueue

SMALL = 100
LARGE = 10_000


def queue(**kwargs: int) -> RequestQueue[str]:
    return RequestQueue[str](kwargs.pop("capacity", 100), small_bytes=1000, **kwargs)


def test_a_small_request_is_taken_before_large_ones_queued_ahead_of_it() -> None:
    q = queue(large_limit=4)
    for i in range(3):
        q.put(f"large-{i}", LARGE)
    q.put("small", SMALL)
    assert q.take() == "small"
    assert [q.take() for _ in range(3)] == ["large-0", "large-1", "large-2"]


def test_a_large_request_goes_after_a_streak_of_small_ones() -> None:
    q = queue(small_burst=3, large_limit=1)
    q.put("large", LARGE)
    for i in range(5):
        q.put(f"small-{i}", SMALL)
    taken = [q.take() for _ in range(6)]
    assert taken == ["small-0", "small-1", "small-2", "large", "small-3", "small-4"]


def test_small_requests_taken_while_no_large_one_may_go_do_not_count_as_a_streak() -> None:
    q = queue(small_burst=2, large_limit=1)
    q.put("large-0", LARGE)
    q.put("large-1", LARGE)
    assert q.take() == "large-0"  # in service: large-1 may not go yet
    for i in range(4):
        q.put(f"small-{i}", SMALL)
    assert [q.take() for _ in range(4)] == [f"small-{i}" for i in range(4)]
    q.done(LARGE)
    q.put("small-4", SMALL)
    assert q.take() == "small-4"
    assert q.take() == "large-1"


def test_large_requests_in_service_are_bounded_and_done_frees_a_place() -> None:
    q = queue(large_limit=2)
    for i in range(4):
        q.put(f"large-{i}", LARGE)
    assert [q.take(), q.take(), q.take()] == ["large-0", "large-1", None]
    assert q.large_in_service == 2
    q.done(SMALL)  # a small request being done frees nothing
    assert q.take() is None
    q.done(LARGE)
    assert q.take() == "large-2"


def test_a_full_queue_refuses_more_and_take_all_empties_it() -> None:
    q = queue(capacity=2)
    q.put("a", SMALL)
    q.put("b", LARGE)
    assert q.is_full
    with pytest.raises(OverflowError):
        q.put("c", SMALL)
    assert q.take_all() == ["a", "b"]
    assert len(q) == 0 and not q.is_full


def test_done_for_a_large_request_not_in_service_is_a_bug() -> None:
    with pytest.raises(ValueError, match="not in service"):
        queue().done(LARGE)


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.booleans()),
            st.just(("take", False)),
            st.just(("done", False)),
        ),
        max_size=200,
    ),
    st.integers(1, 5),
    st.integers(1, 4),
)
def test_every_request_comes_out_once_in_lane_order_within_the_bounds(
    ops: list[tuple[str, bool]], burst: int, limit: int
) -> None:
    q = queue(capacity=1000, small_burst=burst, large_limit=limit)
    put: dict[bool, list[int]] = {False: [], True: []}
    taken: dict[bool, list[int]] = {False: [], True: []}
    in_service: list[int] = []
    streak = 0
    for n, (op, large) in enumerate(ops):
        if op == "put":
            q.put(f"{int(large)}-{n}", LARGE if large else SMALL)
            put[large].append(n)
        elif op == "take":
            large_may_go = len(put[True]) > len(taken[True]) and len(in_service) < limit
            item = q.take()
            if item is None:
                assert len(put[False]) == len(taken[False]) and not large_may_go
                continue
            lane, index = item.split("-")
            is_large = lane == "1"
            taken[is_large].append(int(index))
            if is_large:
                in_service.append(int(index))
                streak = 0
            else:
                streak = streak + 1 if large_may_go else 0
                assert streak <= burst
        elif in_service:
            in_service.pop()
            q.done(LARGE)
        assert q.large_in_service == len(in_service) <= limit
    for is_large_lane in (False, True):
        assert taken[is_large_lane] == put[is_large_lane][: len(taken[is_large_lane])]
    remaining = q.take_all()
    assert len(remaining) == sum(len(put[k]) - len(taken[k]) for k in (False, True))
