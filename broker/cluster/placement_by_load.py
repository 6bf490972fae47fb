"""Where new partition leaders go in the one-host cluster: to the least loaded process.

Round-robin by count (broker/cluster/placement.py) balances partitions, not work: one
busy topic's leaders can leave one process at 100 % of its core while the others idle.
Each process reports the bytes produced to it per second over a recent window
(`placement_load_report.py`), and a new partition goes to the process with the least
load, the way Cruise Control and LinkedIn's tools place by bytes in rather than by count.
Loads within a margin of the least count as equal (a rate is a noisy measure): among
those, the process leading the fewest partitions wins, then the rotation's next process,
so an idle cluster places exactly as the round-robin rule does. Placing several
partitions at once, each placed one adds the cluster's mean load per partition to its
process, and they are shared out as evenly as by count (each process takes the count
over the processes, rounded down, and as many processes as are left over one more): a
topic wider than the cluster is spread over all of it, load deciding only who takes the
partitions left over, so it never lands on the processes that were idle a moment ago
alone. (The mean load per partition counts every partition, idle ones too, so it alone
let a 16-partition topic created just after a busy one go to the other half of 8
processes, a benchmark's topics flip-flopping between halves.)

Only new partitions move the balance: a partition's leadership stays where it was
placed, because a process opens its partitions only when a topic or partition is added
(nothing here hands a live partition's log from one process to another).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

LOAD_MARGIN_FRACTION = 0.1
"""Loads within this fraction of the least one are treated as equal."""
LOAD_MARGIN_FLOOR = 64 * 1024.0
"""...and within this many bytes per second: a trickle is no reason to break the rotation."""


@attrs.frozen(slots=True)
class NodeLoad:
    """One process as placement sees it: bytes produced to it per second, leaders it holds."""

    node: int
    bytes_in_per_s: float
    leaders: int


def place_leaders(nodes: Sequence[NodeLoad], count: int, start: int) -> tuple[int, ...]:
    """Leaders for `count` new partitions; `start` is the rotation's starting index (the
    cluster's partition count, as the round-robin rule uses)."""
    ordered = sorted(nodes, key=lambda n: n.node)
    if not ordered:
        raise ValueError("no broker to lead the partitions")
    load = [max(n.bytes_in_per_s, 0.0) for n in ordered]
    leaders = [n.leaders for n in ordered]
    per_partition = sum(load) / max(sum(leaders), 1)
    # Each process takes `base` of the new partitions, and `extra` of them one more.
    base, extras_left = divmod(count, len(ordered))
    taken = [0] * len(ordered)
    chosen: list[int] = []
    for p in range(count):
        open_ = [
            i
            for i in range(len(ordered))
            if taken[i] < base or (taken[i] == base and extras_left > 0)
        ]
        least = min(load[i] for i in open_)
        margin = max(LOAD_MARGIN_FLOOR, LOAD_MARGIN_FRACTION * least)
        rotation = start + p
        best = min(
            (i for i in open_ if load[i] <= least + margin),
            key=lambda i: (leaders[i], (i - rotation) % len(ordered)),
        )
        chosen.append(ordered[best].node)
        load[best] += per_partition
        leaders[best] += 1
        taken[best] += 1
        if taken[best] > base:
            extras_left -= 1
    return tuple(chosen)
