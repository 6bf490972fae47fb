"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

They are pure functions from the members' subscriptions, the topics' partition
counts and the previous target assignment to the next target assignment, so the
group can recompute it whenever its epoch moves. Like Kafka's UniformAssignor
they keep a partition where it was when that keeps the assignment balanced
(stickiness shortens revocations); `range` gives every member a contiguous
range of each topic it subscribes to, as the client-side RangeAssignor does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Assignment = dict[str, dict[str, frozenset[int]]]
"""member id -> topic name -> partitions."""

Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Mapping[str, frozenset[int]]]],
    Assignment,
]
"""(subscribed topics per member, partition count per topic, previous target) -> target."""


def _as_assignment(owned: Mapping[str, set[tuple[str, int]]]) -> Assignment:
    result: Assignment = {}
    for member, partitions in owned.items():
        topics: dict[str, set[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, set()).add(partition)
        result[member] = {t: frozenset(p) for t, p in topics.items()}
    return result


def uniform_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Mapping[str, frozenset[int]]],
) -> Assignment:
    """Balanced over the members that may take each partition, sticky to `previous`.

    Every partition of a subscribed topic goes to a subscriber; a partition moves
    only when its owner holds at least two more than another subscriber of its
    topic, so with identical subscriptions counts differ by at most one.
    """
    members = sorted(subscriptions)
    owned: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    eligible: dict[str, list[str]] = {
        topic: [m for m in members if topic in subscriptions[m]]
        for topic in sorted(partition_counts)
    }
    taken: set[tuple[str, int]] = set()
    for member in members:
        for topic, partitions in sorted(previous.get(member, {}).items()):
            if topic not in subscriptions[member] or topic not in partition_counts:
                continue
            for partition in sorted(partitions):
                tp = (topic, partition)
                if partition < partition_counts[topic] and tp not in taken:
                    owned[member].add(tp)
                    taken.add(tp)
    for topic, subscribers in eligible.items():
        if not subscribers:
            continue
        for partition in range(partition_counts[topic]):
            if (topic, partition) not in taken:
                target = min(subscribers, key=lambda m: (len(owned[m]), m))
                owned[target].add((topic, partition))
    # Move partitions from the most to the least loaded eligible member until no move
    # narrows a gap of two or more; each move lowers the sum of squared counts, so
    # this ends (bounded anyway by the partition count squared).
    limit = (sum(partition_counts.values()) + 1) ** 2
    for _ in range(limit):
        moved = False
        for donor in sorted(members, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[donor]):
                receivers = [m for m in eligible[tp[0]] if len(owned[m]) < len(owned[donor]) - 1]
                if receivers:
                    receiver = min(receivers, key=lambda m: (len(owned[m]), m))
                    owned[donor].discard(tp)
                    owned[receiver].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return _as_assignment(owned)


def range_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Mapping[str, frozenset[int]]],
) -> Assignment:
    """Per topic, its subscribers sorted by member id each take a contiguous range;
    the first `partitions % subscribers` take one more."""
    del previous  # range is not sticky: the ranges follow the sorted members
    owned: dict[str, set[tuple[str, int]]] = {m: set() for m in subscriptions}
    for topic in sorted(partition_counts):
        subscribers = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not subscribers:
            continue
        count = partition_counts[topic]
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            size = quota + (1 if index < extra else 0)
            owned[member].update((topic, p) for p in range(start, start + size))
            start += size
    return _as_assignment(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
"""Kafka's assignor names (`group.consumer.assignors`, ConsumerGroupHeartbeat's ServerAssignor)."""
