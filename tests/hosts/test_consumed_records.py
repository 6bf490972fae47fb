"""The group checker over member histories written by hand: each broken promise found,
and nothing where the group resumed as at-least-once allows."""

from __future__ import annotations

from tests.hosts.consumed_records import (
    ConsumedHistory,
    GroupEvent,
    Kind,
    covers,
    resumption_anomalies,
)

LOG = {0: [(offset, f"v{offset}".encode()) for offset in range(6)]}


class Script:
    """Events in the order written, one time unit apart."""

    def __init__(self) -> None:
        self.history = ConsumedHistory()

    def _note(self, member: str, kind: Kind, offset: int = -1, value: bytes = b"") -> None:
        at = float(len(self.history.events))
        self.history.note(GroupEvent(at, member, kind, 0, offset, value))

    def assigned(self, member: str) -> None:
        self._note(member, Kind.ASSIGNED)

    def revoked(self, member: str) -> None:
        self._note(member, Kind.REVOKED)

    def given(self, member: str, *offsets: int, value: bytes | None = None) -> None:
        for offset in offsets:
            self._note(member, Kind.DELIVERED, offset, value or f"v{offset}".encode())

    def committed(self, member: str, offset: int, confirmed: bool = True) -> None:
        self._note(member, Kind.COMMIT_SENT, offset)
        if confirmed:
            self._note(member, Kind.COMMIT_CONFIRMED, offset)


def test_a_group_resuming_at_its_committed_offset_after_a_rebalance_has_no_anomaly() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 0, 1, 2)
    script.committed("a", 3)
    script.revoked("a")
    script.assigned("b")
    script.given("b", 3, 4, 5)
    assert resumption_anomalies(script.history, LOG) == []
    assert covers(script.history, LOG)
    assert script.history.assigned_after(0.5) == {"b"}


def test_records_after_the_last_confirmed_commit_may_be_given_again() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 0, 1, 2)
    script.committed("a", 1)
    script.committed("a", 3, confirmed=False)  # its answer lost: maybe written, maybe not
    script.revoked("a")
    script.assigned("b")
    script.given("b", 1, 2, 3, 4, 5)
    assert resumption_anomalies(script.history, LOG) == []
    # had the unconfirmed commit been written, resuming at 3 would be right too.
    again = Script()
    again.history.events.extend(script.history.events[:-5])
    again.given("b", 3, 4, 5)
    assert resumption_anomalies(again.history, LOG) == []


def test_resuming_before_the_confirmed_commit_gives_committed_records_again() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 0, 1, 2)
    script.committed("a", 3)
    script.revoked("a")
    script.assigned("b")
    script.given("b", 1, 2, 3, 4, 5)
    assert resumption_anomalies(script.history, LOG) == [
        "0/1 given to b on resuming: before the confirmed commit (3)"
    ]


def test_resuming_past_every_commit_sent_skips_records() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 0, 1)
    script.committed("a", 2)
    script.revoked("a")
    script.assigned("b")
    script.given("b", 4, 5)
    assert resumption_anomalies(script.history, LOG) == [
        "0/4 given to b on resuming: past the last commit sent (2)",
        "2 records of partition 0 never given: [2, 3]",
    ]
    assert not covers(script.history, LOG)


def test_a_member_starts_at_the_log_start_when_nothing_was_committed() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 2, 3, 4, 5)
    assert resumption_anomalies(script.history, LOG) == [
        "0/2 given to a on resuming: past the last commit sent (0)",
        "2 records of partition 0 never given: [0, 1]",
    ]


def test_within_one_assignment_records_come_one_after_another() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 0, 1, 3, 2, 3, 4, 5)  # 2 skipped, then 2 and 3 given again
    assert resumption_anomalies(script.history, LOG) == [
        "0/3 given to a after 1: expected 2",
        "0/2 given to a after 3: expected 4",
    ]


def test_a_record_given_that_the_log_does_not_hold_is_found() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 0)
    script.given("a", 1, value=b"replaced")
    script.given("a", 2, 3, 4, 5)
    assert resumption_anomalies(script.history, LOG) == [
        "0/1 given to a is b'replaced', the log holds b'v1'"
    ]


def test_a_record_given_to_a_member_not_holding_the_partition_is_found() -> None:
    script = Script()
    script.assigned("a")
    script.given("a", 0, 1, 2)
    script.revoked("a")
    script.given("a", 3)
    assert resumption_anomalies(script.history, LOG)[0] == (
        "0/3 given to a, which does not hold partition 0"
    )
