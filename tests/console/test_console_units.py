"""The console's pure parts without a network: transaction states, query and form parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.client.session import ClientError
from broker.console.messages import BrowseQuery, parse_query
from broker.console.security_admin import quota_entity
from broker.console.transaction_states import (
    ABORTED,
    COMMITTED,
    OPEN,
    Marker,
    TransactionStates,
)


def _seen(markers: list[Marker], last_stable_offset: int) -> TransactionStates:
    states = TransactionStates()
    for marker in markers:
        states.saw_marker(marker)
    states.saw_last_stable_offset(last_stable_offset)
    return states


def test_the_next_marker_of_the_same_producer_decides_a_record() -> None:
    states = _seen([Marker(3, 7, commit=False), Marker(5, 8, commit=True), Marker(9, 7, True)], 10)
    assert states.state(1, 7) == ABORTED  # producer 7's first marker after offset 1 aborts
    assert states.state(4, 7) == COMMITTED  # after offset 3 its next marker commits
    assert states.state(4, 8) == COMMITTED
    assert states.state(6, 8) is None  # no marker seen after it, below the LSO: undecided
    assert states.state(10, 8) == OPEN  # at or beyond the last stable offset


def test_aborted_transactions_decide_what_the_markers_read_did_not() -> None:
    # Producer 7 aborted a transaction from offset 2 (ended by its marker at 4, seen),
    # then began another at 6 whose marker was not read; producer 8 aborted from 10.
    states = _seen([Marker(4, 7, commit=False)], 100)
    aborted = [(7, 2), (8, 10)]
    assert states.decide(6, 7, aborted) == COMMITTED  # the aborted one ended at 4
    assert states.decide(12, 8, aborted) == ABORTED
    assert states.decide(9, 8, aborted) == COMMITTED  # before its aborted transaction began
    assert states.decide(12, 9, aborted) == COMMITTED
    assert states.decide(7, 7, [*aborted, (7, 6)]) == ABORTED


@given(
    st.dictionaries(
        st.sampled_from(
            ["partition", "offset", "timestamp", "limit", "order", "contains", "other"]
        ),
        st.text(max_size=30),
    )
)
def test_any_query_string_is_a_query_or_one_clear_error(params: dict[str, str]) -> None:
    try:
        query = parse_query("t", params)
    except ClientError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert isinstance(query, BrowseQuery) and 1 <= query.limit <= 500


@pytest.mark.parametrize(
    ("body", "entity"),
    [
        ({"entity_type": "user", "entity_name": "bob"}, [("user", "bob")]),
        ({"entity_type": "client-id", "entity_name": ""}, [("client-id", None)]),
        ({"entity": {"user": "bob", "client-id": "app"}}, [("client-id", "app"), ("user", "bob")]),
        ({"entity": {"user": None, "client-id": "app"}}, [("client-id", "app"), ("user", None)]),
        ({"entity": {"ip": "127.0.0.1"}}, [("ip", "127.0.0.1")]),
    ],
)
def test_a_quota_form_names_one_of_kafkas_entities(body: dict, entity: list) -> None:  # type: ignore[type-arg]
    assert quota_entity(body) == entity


@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.text(),
        st.lists(st.text()),
        st.dictionaries(st.text(max_size=10), st.one_of(st.none(), st.text())),
    )
)
def test_any_other_quota_entity_is_refused_in_one_line(entity: object) -> None:
    try:
        quota_entity({"entity": entity})
    except ClientError as exc:
        assert "a quota's entity is one of" in str(exc)
    else:
        assert isinstance(entity, dict) and sorted(entity) in (
            ["user"],
            ["client-id"],
            ["client-id", "user"],
            ["ip"],
        )
