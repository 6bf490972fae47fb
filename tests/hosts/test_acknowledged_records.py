"""The fault tests' checker, over histories written by hand: it finds each kind of
broken promise, and nothing where the log keeps them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.hosts.acknowledged_records import ProducedHistory, SentValue, anomalies


def value(producer: str, sequence: int) -> bytes:
    return SentValue(producer, sequence).encode()


def history(sent: list[bytes], acknowledged: dict[bytes, tuple[int, int]]) -> ProducedHistory:
    produced = ProducedHistory()
    for sent_value in sent:
        produced.on_sent(sent_value)
    for acked, (partition, offset) in acknowledged.items():
        produced.on_acknowledged(acked, partition, offset, at=float(offset))
    return produced


def test_a_log_holding_every_acknowledged_record_once_in_order_has_no_anomaly() -> None:
    a0, a1, b0, b1 = value("a", 0), value("a", 1), value("b", 0), value("b", 1)
    produced = history([a0, a1, b0, b1], {a0: (0, 0), b0: (0, 1), a1: (0, 2)})
    # b1 was never acknowledged (in flight at a failover): being there is allowed.
    assert anomalies(produced, {0: [(0, a0), (1, b0), (2, a1), (3, b1)]}) == []
    # and so is being absent.
    assert anomalies(produced, {0: [(0, a0), (1, b0), (2, a1)]}) == []


def test_an_acknowledged_record_missing_from_its_partition_is_lost() -> None:
    a0, a1 = value("a", 0), value("a", 1)
    produced = history([a0, a1], {a0: (0, 0), a1: (0, 1)})
    assert anomalies(produced, {0: [(0, a0)]}) == [f"{a1!r} acknowledged at 0/1 is lost"]
    # in another partition it is lost from its own too.
    assert anomalies(produced, {0: [(0, a0)], 1: [(1, a1)]}) == [
        f"{a1!r} acknowledged at 0/1 is at [(1, 1)]"
    ]


def test_an_acknowledged_record_at_another_offset_was_rewritten() -> None:
    a0, a1 = value("a", 0), value("a", 1)
    produced = history([a0, a1], {a0: (0, 0), a1: (0, 1)})
    assert anomalies(produced, {0: [(0, a0), (5, a1)]}) == [
        f"{a1!r} acknowledged at 0/1 is at [(0, 5)]"
    ]


def test_a_record_acknowledged_without_an_offset_must_be_in_its_partition() -> None:
    # librdkafka's implicit acknowledgement: durable, at an offset it does not know.
    a0, a1 = value("a", 0), value("a", 1)
    produced = history([a0, a1], {a0: (0, 0)})
    produced.on_acknowledged(a1, 0, None, at=1.0)
    assert anomalies(produced, {0: [(0, a0), (7, a1)]}) == []
    assert anomalies(produced, {0: [(0, a0)]}) == [f"{a1!r} acknowledged at 0/None is lost"]
    assert anomalies(produced, {0: [(0, a0)], 1: [(3, a1)]}) == [
        f"{a1!r} acknowledged in partition 0 is at [(1, 3)]"
    ]


def test_a_record_read_twice_is_a_duplicate_even_if_unacknowledged() -> None:
    a0 = value("a", 0)
    produced = history([a0], {})
    assert anomalies(produced, {0: [(0, a0), (1, a0)]}) == [
        f"{a0!r} is there 2 times: [(0, 0), (0, 1)]"
    ]


def test_a_value_never_sent_is_reported() -> None:
    produced = history([value("a", 0)], {})
    assert anomalies(produced, {1: [(0, b"junk"), (1, value("a", 7))]}) == [
        f"{value('a', 7)!r} at 1/1 was never sent",
        "b'junk' at 1/0 was never sent",
    ]


def test_a_producers_values_out_of_sending_order_are_reported() -> None:
    a0, a1, b0 = value("a", 0), value("a", 1), value("b", 0)
    produced = history([a0, a1, b0], {})
    assert anomalies(produced, {0: [(0, a1), (1, b0), (2, a0)]}) == [
        f"{a0!r} at 0/2 follows a-1: out of producing order"
    ]


def test_the_failover_time_ends_at_the_first_acknowledgement_of_a_record_sent_after_the_fault() -> (
    None
):
    produced = ProducedHistory()
    for sequence, (sent_at, partition, acked_at) in enumerate(
        [(0.5, 0, 1.0), (1.5, 0, 2.5), (3.0, 1, 7.0), (4.0, 0, 9.0)]
    ):
        produced.on_sent(value("a", sequence), at=sent_at)
        produced.on_acknowledged(value("a", sequence), partition, sequence, at=acked_at)
    # a-1 was acknowledged after the fault at 2.0, but sent before it.
    assert produced.first_acknowledged_after({0}, 2.0) == 9.0
    assert produced.first_acknowledged_after({0, 1}, 2.0) == 7.0
    assert produced.first_acknowledged_after({0}, 10.0) is None


@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 2)), max_size=20),
    st.data(),
)
def test_any_log_of_the_producers_own_records_in_order_has_no_anomaly(
    sends: list[tuple[str, int]], data: st.DataObject
) -> None:
    """Each producer's values spread over partitions in order, some acknowledged where
    they landed: only what the checker must accept."""
    sequences = {"a": 0, "b": 0}
    produced = ProducedHistory()
    logs: dict[int, list[tuple[int, bytes]]] = {0: [], 1: [], 2: []}
    for producer, partition in sends:
        sent = value(producer, sequences[producer])
        sequences[producer] += 1
        produced.on_sent(sent)
        if data.draw(st.booleans()):  # not acknowledged: kept or not
            if data.draw(st.booleans()):
                logs[partition].append((len(logs[partition]), sent))
            continue
        offset = len(logs[partition])
        logs[partition].append((offset, sent))
        produced.on_acknowledged(sent, partition, offset, at=0.0)
    assert anomalies(produced, logs) == []
    merged = ProducedHistory()
    merged.merge(produced)
    assert anomalies(merged, logs) == []
