"""The transactions checker over histories written by hand: it finds each kind of torn,
lost, leaked or repeated transaction, and nothing where read_committed keeps them whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.hosts.committed_transactions import (
    Outcome,
    TransactionalValue,
    TransactionHistory,
    transaction_anomalies,
)

PARTITIONS = (0, 1)


def values(name: str) -> dict[int, list[bytes]]:
    return {p: [TransactionalValue(name, p, i).encode() for i in range(2)] for p in PARTITIONS}


def history(**outcomes: Outcome) -> TransactionHistory:
    written = TransactionHistory()
    for name, outcome in outcomes.items():
        written.begin(name, values(name))
        written.end(name, outcome)
    return written


def log(*names: str) -> dict[int, list[tuple[int, bytes]]]:
    """The read_committed read-back of these transactions, whole, in this order (offsets
    leave room for markers and aborted records)."""
    read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in PARTITIONS}
    for p in PARTITIONS:
        for name in names:
            read[p].extend((3 * len(read[p]), v) for v in values(name)[p])
    return read


def test_committed_transactions_whole_and_nothing_of_aborted_ones_has_no_anomaly() -> None:
    written = history(t0=Outcome.COMMITTED, t1=Outcome.ABORTED, t2=Outcome.COMMITTED)
    assert transaction_anomalies(written, log("t0", "t2")) == []


def test_a_transaction_of_unknown_outcome_may_be_there_whole_or_not_at_all() -> None:
    written = history(t0=Outcome.COMMITTED, t1=Outcome.UNKNOWN, t2=Outcome.OPEN)
    assert transaction_anomalies(written, log("t0", "t1")) == []
    assert transaction_anomalies(written, log("t0", "t2")) == []
    assert transaction_anomalies(written, log("t0")) == []


def test_a_committed_transaction_missing_a_partition_is_not_whole() -> None:
    read = log("t0")
    read[1] = []
    assert transaction_anomalies(history(t0=Outcome.COMMITTED), read) == [
        f"committed t0 not whole: {values('t0')[1]} missing"
    ]


def test_an_unknown_transaction_in_one_partition_only_is_torn() -> None:
    read = log("t0")
    read[0] = []
    assert transaction_anomalies(history(t0=Outcome.UNKNOWN), read) == [
        f"unknown t0 not whole: {values('t0')[0]} missing"
    ]


def test_a_record_of_an_aborted_transaction_is_visible() -> None:
    read = log("t0")
    read[0] = read[0][:1]
    read[1] = []
    assert transaction_anomalies(history(t0=Outcome.ABORTED), read) == [
        "aborted t0 visible in partitions [0]"
    ]


def test_a_committed_record_read_twice_is_found() -> None:
    read = log("t0")
    read[0].append((99, read[0][0][1]))
    assert transaction_anomalies(history(t0=Outcome.COMMITTED), read) == [
        "committed t0 has a record twice in partition 0"
    ]


def test_records_out_of_producing_order_are_found() -> None:
    read = log("t0")
    read[1] = [(0, read[1][1][1]), (1, read[1][0][1])]
    found = transaction_anomalies(history(t0=Outcome.COMMITTED), read)
    assert found == [f"committed t0 out of order in partition 1: {[v for _, v in read[1]]}"]


def test_a_transaction_before_one_begun_earlier_is_out_of_order() -> None:
    written = history(t0=Outcome.COMMITTED, t1=Outcome.COMMITTED)
    first, *_ = values("t0")[0]
    assert transaction_anomalies(written, log("t1", "t0")) == [
        f"{first!r} at 0/6 follows a record of t1, begun after it",
        f"{values('t0')[1][0]!r} at 1/6 follows a record of t1, begun after it",
    ]


def test_values_never_sent_or_in_another_partition_are_found() -> None:
    read = log("t0")
    stray = TransactionalValue("t0", 1, 0).encode()
    read[0].append((50, stray))
    read[1].append((50, b"t9/1/0"))
    assert transaction_anomalies(history(t0=Outcome.COMMITTED), read) == [
        f"{stray!r} at 0/50 was sent to another partition",
        "b't9/1/0' at 1/50 was never sent",
    ]


@given(st.lists(st.sampled_from(list(Outcome)), min_size=1, max_size=6), st.data())
def test_any_whole_read_of_committed_and_some_unknown_transactions_passes(
    outcomes: list[Outcome], data: st.DataObject
) -> None:
    written = history(**{f"t{i}": outcome for i, outcome in enumerate(outcomes)})
    undecided = {Outcome.UNKNOWN, Outcome.OPEN}
    names = [
        f"t{i}"
        for i, outcome in enumerate(outcomes)
        if outcome is Outcome.COMMITTED or (outcome in undecided and data.draw(st.booleans()))
    ]
    assert transaction_anomalies(written, log(*names)) == []
    if any(o is Outcome.ABORTED for o in outcomes):
        aborted = next(f"t{i}" for i, o in enumerate(outcomes) if o is Outcome.ABORTED)
        assert transaction_anomalies(written, log(*names, aborted)) != []
