"""The checker's part for consumer groups (sans-IO): a group consuming through faults
resumes from its committed offsets.

Each member notes what it is assigned and revoked, every record it is given, every
commit it sends and every commit the coordinator confirms, with the time. After the
faults, `resumption_anomalies` replays those events in time order against the
partitions as read back:

- within one assignment a member is given the partition's records one after another:
  none skipped, none given twice;
- after each (re)assignment the member starts at the group's committed offset: no
  earlier than the last commit the coordinator confirmed (a committed record is not
  given again) and no later than the last commit sent, confirmed or not (a commit whose
  answer was lost may have been written: at-least-once allows either);
- every record it is given is the record the log holds at that offset;
- every record of every partition was given to some member.

Commits are synchronous, one at a time per member, so "the last commit" is well
defined; a member commits only partitions it holds, before its next poll, so its
commits precede the revocation that hands the partition to another member.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from enum import Enum

import attrs

from tests.hosts.acknowledged_records import ReadBack


class Kind(Enum):
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    DELIVERED = "delivered"
    COMMIT_SENT = "commit sent"
    COMMIT_CONFIRMED = "commit confirmed"


@attrs.frozen
class GroupEvent:
    at: float  # time.monotonic()
    member: str
    kind: Kind
    partition: int
    offset: int = -1  # DELIVERED: the record's; commits: the next offset to read
    value: bytes = b""  # DELIVERED only


@attrs.define
class ConsumedHistory:
    """Events appended by the members' threads (list.append is atomic)."""

    events: list[GroupEvent] = attrs.field(factory=list)

    def note(self, event: GroupEvent) -> None:
        self.events.append(event)

    def delivered(self) -> dict[int, set[int]]:
        given: dict[int, set[int]] = defaultdict(set)
        for event in list(self.events):
            if event.kind is Kind.DELIVERED:
                given[event.partition].add(event.offset)
        return given

    def assigned_times(self, member: str) -> list[float]:
        return [e.at for e in list(self.events) if e.kind is Kind.ASSIGNED and e.member == member]

    def assigned_after(self, moment: float) -> set[str]:
        """The members given partitions after `moment` (a rebalance happened since)."""
        return {e.member for e in list(self.events) if e.kind is Kind.ASSIGNED and e.at > moment}


def covers(history: ConsumedHistory, read: ReadBack) -> bool:
    """Every record read back has been given to some member."""
    given = history.delivered()
    return all({o for o, _ in records} <= given[p] for p, records in read.items())


@attrs.define
class _Holding:
    """A member's assignment of one partition: where it started and where it is."""

    lowest: float  # the first record it may start at (inf: none is there yet)
    highest: float  # the last record it may start at
    last: int | None = None


def resumption_anomalies(history: ConsumedHistory, read: ReadBack) -> list[str]:
    """Everything the members' events break of the rules above; empty when none."""
    offsets = {p: [o for o, _ in records] for p, records in read.items()}
    values = {p: dict(records) for p, records in read.items()}
    confirmed: dict[int, int] = {}
    sent: dict[int, int] = {}
    holding: dict[tuple[str, int], _Holding] = {}
    given: dict[int, set[int]] = defaultdict(set)
    found: list[str] = []

    def first_record_from(partition: int, offset: int) -> float:
        log = offsets.get(partition, [])
        index = bisect.bisect_left(log, offset)
        return log[index] if index < len(log) else float("inf")

    for event in sorted(history.events, key=lambda e: e.at):
        key, p = (event.member, event.partition), event.partition
        if event.kind is Kind.ASSIGNED:
            start = offsets[p][0] if offsets.get(p) else 0
            lowest = confirmed.get(p, start)
            highest = max(sent.get(p, lowest), lowest)
            holding[key] = _Holding(first_record_from(p, lowest), first_record_from(p, highest))
        elif event.kind is Kind.REVOKED:
            holding.pop(key, None)
        elif event.kind is Kind.COMMIT_SENT:
            sent[p] = max(sent.get(p, event.offset), event.offset)
        elif event.kind is Kind.COMMIT_CONFIRMED:
            confirmed[p] = event.offset
        else:
            found.extend(_delivery_anomalies(event, holding.get(key), offsets, values))
            given[p].add(event.offset)
            if key in holding:
                holding[key].last = event.offset
    for p, log in offsets.items():
        missing = sorted(set(log) - given[p])
        if missing:
            found.append(f"{len(missing)} records of partition {p} never given: {missing[:5]}")
    return found


def _delivery_anomalies(
    event: GroupEvent,
    held: _Holding | None,
    offsets: dict[int, list[int]],
    values: dict[int, dict[int, bytes]],
) -> list[str]:
    p, offset, member = event.partition, event.offset, event.member
    where = f"{p}/{offset} given to {member}"
    if values.get(p, {}).get(offset) != event.value:
        return [f"{where} is {event.value!r}, the log holds {values.get(p, {}).get(offset)!r}"]
    if held is None:
        return [f"{where}, which does not hold partition {p}"]
    if held.last is None:
        if offset < held.lowest:
            return [f"{where} on resuming: before the confirmed commit ({held.lowest})"]
        if offset > held.highest:
            return [f"{where} on resuming: past the last commit sent ({held.highest})"]
        return []
    log: Sequence[int] = offsets[p]
    index = bisect.bisect_right(log, held.last)
    following = log[index] if index < len(log) else None
    if offset != following:
        return [f"{where} after {held.last}: expected {following}"]
    return []
