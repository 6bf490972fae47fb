"""GroupDeadlines: each group is woken once its earliest scheduled deadline is due."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.coordinator.group_deadlines import GroupDeadlines

GROUPS = st.sampled_from(["a", "b", "c", "d"])
TIMES = st.floats(min_value=0, max_value=100, allow_nan=False)


@given(st.lists(st.tuples(GROUPS, TIMES), max_size=30), TIMES)
def test_a_group_is_due_once_its_earliest_deadline_has_passed(
    schedules: list[tuple[str, float]], now: float
) -> None:
    deadlines = GroupDeadlines()
    earliest: dict[str, float] = {}
    for group, at in schedules:
        deadlines.schedule(group, at)
        earliest[group] = min(at, earliest.get(group, at))
    expected_next = min(earliest.values(), default=None)
    assert deadlines.next_deadline() == expected_next
    due = deadlines.pop_due(now)
    assert sorted(due) == sorted(g for g, at in earliest.items() if at <= now)
    assert len(due) == len(set(due)), "each group once"
    assert all(at > now for at in [d for d in [deadlines.next_deadline()] if d is not None])


def test_no_deadline_schedules_nothing_and_a_later_one_does_not_delay_an_earlier() -> None:
    deadlines = GroupDeadlines()
    deadlines.schedule("g", None)
    assert deadlines.next_deadline() is None
    deadlines.schedule("g", 5.0)
    deadlines.schedule("g", 9.0)
    assert deadlines.pop_due(5.0) == ["g"]
    assert deadlines.pop_due(10.0) == []
