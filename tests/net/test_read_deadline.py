"""socket.request.read.timeout.ms: one deadline per frame, checked lazily."""

from __future__ import annotations

from broker.net.read_deadline import ReadDeadline, overdue


def test_the_clock_starts_at_the_first_byte_and_is_not_reset_by_later_ones() -> None:
    deadline = ReadDeadline()
    deadline.arm(10.0, 5.0)
    deadline.arm(12.0, 5.0)
    assert deadline.expires_at == 15.0
    assert not deadline.is_past(14.9)
    assert deadline.is_past(15.0)


def test_a_completed_frame_has_no_deadline_and_the_next_starts_afresh() -> None:
    deadline = ReadDeadline()
    deadline.arm(0.0, 5.0)
    deadline.disarm()
    assert not deadline.is_past(100.0)
    deadline.arm(100.0, 5.0)
    assert deadline.expires_at == 105.0


def test_a_timeout_of_zero_or_less_disables_the_deadline() -> None:
    deadline = ReadDeadline()
    deadline.arm(0.0, -1.0)
    deadline.arm(0.0, 0.0)
    assert deadline.expires_at is None


def test_overdue_names_the_late_and_wakes_for_the_earliest_other() -> None:
    late, on_time, idle = ReadDeadline(), ReadDeadline(), ReadDeadline()
    late.arm(0.0, 5.0)
    on_time.arm(3.0, 5.0)
    found, next_check = overdue([("late", late), ("on time", on_time), ("idle", idle)], 6.0, 5.0)
    assert found == ["late"]
    assert next_check == 8.0


def test_with_nothing_in_progress_the_next_check_is_one_timeout_away() -> None:
    assert overdue([], 6.0, 5.0) == ([], 11.0)
