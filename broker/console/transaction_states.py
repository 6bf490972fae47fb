"""Whether a transactional record the console shows was committed, aborted, or is open.

A read with READ_UNCOMMITTED (the console shows every record) sees the transaction
markers a transaction coordinator wrote after its producer's records: the first
COMMIT or ABORT marker of the same producer after a record decides it, as a
producer has at most one transaction open at a time. A record at or beyond the last
stable offset without such a marker is open. Below it a marker may lie beyond what
was read; then the aborted transactions a READ_COMMITTED Fetch gives for the range
decide, the way a Kafka consumer skips aborted records: the record is aborted when
its producer has an aborted transaction that began at or before it and no marker of
that producer lies between (that would have ended the aborted one first).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import attrs

COMMITTED = "committed"
ABORTED = "aborted"
OPEN = "open"


@attrs.frozen
class Marker:
    offset: int
    producer_id: int
    commit: bool


class TransactionStates:
    """What reads of one partition saw: markers per producer, the last stable offset."""

    def __init__(self) -> None:
        self._offsets: dict[int, list[int]] = {}
        self._commits: dict[int, list[bool]] = {}
        self.last_stable_offset = -1

    def saw_marker(self, marker: Marker) -> None:
        offsets = self._offsets.setdefault(marker.producer_id, [])
        commits = self._commits.setdefault(marker.producer_id, [])
        at = bisect.bisect_left(offsets, marker.offset)  # one read twice does no harm
        offsets.insert(at, marker.offset)
        commits.insert(at, marker.commit)

    def saw_last_stable_offset(self, offset: int) -> None:
        self.last_stable_offset = max(self.last_stable_offset, offset)

    def state(self, offset: int, producer_id: int) -> str | None:
        """COMMITTED, ABORTED or OPEN; None when the aborted transactions must decide."""
        offsets = self._offsets.get(producer_id, [])
        at = bisect.bisect_right(offsets, offset)
        if at < len(offsets):
            return COMMITTED if self._commits[producer_id][at] else ABORTED
        if offset >= self.last_stable_offset:
            return OPEN
        return None

    def decide(self, offset: int, producer_id: int, aborted: Iterable[tuple[int, int]]) -> str:
        """The state of a record below the last stable offset whose marker was not seen,
        from (producer id, first offset) of the aborted transactions overlapping it."""
        offsets = self._offsets.get(producer_id, [])
        for aborted_producer, first_offset in aborted:
            if aborted_producer != producer_id or first_offset > offset:
                continue
            between = bisect.bisect_left(offsets, first_offset) < bisect.bisect_left(
                offsets, offset
            )
            if not between:
                return ABORTED
        return COMMITTED
