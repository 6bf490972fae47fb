"""Leader spreading and Kafka's group-to-partition hash."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.placement import (
    coordinator_shard,
    group_partition,
    java_string_hash,
    spread_leaders,
)


def test_java_string_hash_matches_javas_string_hashcode() -> None:
    # Values of java.lang.String.hashCode, including a collision and a surrogate pair.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00


def test_a_group_whose_hash_is_integer_min_value_maps_to_partition_zero_as_in_kafka() -> None:
    # Kafka's Utils.abs(Integer.MIN_VALUE) is 0, not a negative number.
    assert group_partition("polygenelubricants", 50) == 0


@given(st.text(max_size=40), st.integers(min_value=1, max_value=64))
def test_every_group_maps_to_a_partition_in_range(group: str, partitions: int) -> None:
    assert 0 <= group_partition(group, partitions) < partitions
    assert coordinator_shard(group, partitions) == group_partition(group, partitions)


def test_groups_spread_over_every_process() -> None:
    shards = Counter(coordinator_shard(f"group-{i}", 3) for i in range(300))
    assert set(shards) == {0, 1, 2}
    assert min(shards.values()) > 60


def test_leaders_are_spread_round_robin_from_the_start_index() -> None:
    assert spread_leaders([3, 1, 2], 5, 0) == (1, 2, 3, 1, 2)
    assert spread_leaders([1, 2, 3], 4, 2) == (3, 1, 2, 3)


@given(
    st.lists(st.integers(min_value=0, max_value=100), min_size=1, max_size=8, unique=True),
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=0, max_value=1000),
)
def test_spread_leaders_are_balanced_within_one(nodes: list[int], count: int, start: int) -> None:
    counts = Counter(spread_leaders(nodes, count, start))
    per_node = [counts.get(n, 0) for n in nodes]
    assert max(per_node) - min(per_node) <= 1
    assert set(counts) <= set(nodes)
