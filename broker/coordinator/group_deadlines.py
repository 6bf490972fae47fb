"""When each group's coordinator must next look at it: the earliest of its members'
session, rebalance and revocation deadlines, shared by the classic and the KIP-848
coordinators.

A heap of (deadline, group id) with lazy deletion: a group rescheduled earlier gets a
new entry and the old one is skipped when it comes up, so scheduling is O(log n) and
nothing is searched. A group is woken at most once per entry that is due; waking a group
whose deadline moved later is harmless (it finds nothing due and is rescheduled).
"""

from __future__ import annotations

import heapq


class GroupDeadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []
        self._scheduled: dict[str, float] = {}

    def schedule(self, group_id: str, deadline: float | None) -> None:
        """Wake `group_id` at `deadline` unless it is already due no later."""
        if deadline is None:
            return
        current = self._scheduled.get(group_id)
        if current is None or deadline < current:
            self._scheduled[group_id] = deadline
            heapq.heappush(self._heap, (deadline, group_id))

    def next_deadline(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[str]:
        """The groups with an entry due at `now`, each once, earliest first; the caller
        looks at each and schedules its next deadline."""
        due: dict[str, None] = {}
        while self._heap and self._heap[0][0] <= now:
            deadline, group_id = heapq.heappop(self._heap)
            if self._scheduled.get(group_id) == deadline:
                del self._scheduled[group_id]
            due[group_id] = None
        return list(due)
