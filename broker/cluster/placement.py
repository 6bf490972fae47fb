"""Where things live in the cluster: partition leaders and group coordinators.

Both rules are Kafka's: leaders are spread round-robin over the brokers from a
starting index (Kafka picks it at random; here it is the cluster's partition
count, so consecutive topics continue the rotation and placement is
reproducible), and a group belongs to `__consumer_offsets` partition
`abs(javaHashCode(group)) % partitions`, whose leader is its coordinator.
"""

from __future__ import annotations

from collections.abc import Sequence


def spread_leaders(nodes: Sequence[int], count: int, start: int) -> tuple[int, ...]:
    """Leaders for `count` new partitions, round-robin over `nodes` from `start`."""
    ordered = sorted(nodes)
    if not ordered:
        raise ValueError("no broker to lead the partitions")
    return tuple(ordered[(start + p) % len(ordered)] for p in range(count))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    result = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        unit = (encoded[i] << 8) | encoded[i + 1]
        result = (31 * result + unit) & 0xFFFFFFFF
    return result - (1 << 32) if result >= 1 << 31 else result


def group_partition(group_id: str, partitions: int) -> int:
    """Kafka's partitionFor(groupId): Utils.abs(hashCode) % offsets partitions."""
    hashed = java_string_hash(group_id)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions


def coordinator_shard(group_id: str, shards: int) -> int:
    """The process index (0-based) coordinating a group when there are `shards` processes."""
    return group_partition(group_id, shards)
