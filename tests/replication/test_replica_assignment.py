"""Replica placement as Kafka's AdminUtils places replicas."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.replication.replica_assignment import (
    BrokerMetadata,
    RackInformationIncomplete,
    assign_new_partitions,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_without_racks_the_placement_is_kafkas() -> None:
    brokers = [BrokerMetadata(b) for b in range(5)]
    assert assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0) == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_with_racks_brokers_alternate_between_racks_as_in_kafka() -> None:
    assert rack_alternated_broker_list(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in RACKS.items() if b != 5}) == [
        0,
        3,
        1,
        4,
        2,
    ]
    brokers = [BrokerMetadata(b, r) for b, r in RACKS.items()]
    assert assign_replicas_to_brokers(brokers, 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


def test_a_replication_factor_above_the_brokers_names_both_numbers() -> None:
    with pytest.raises(KafkaError) as raised:
        assign_replicas_to_brokers([BrokerMetadata(1), BrokerMetadata(2)], 1, 3)
    assert raised.value.error_code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert str(raised.value) == "Replication factor: 3 larger than available brokers: 2."
    with pytest.raises(KafkaError):
        assign_replicas_to_brokers([BrokerMetadata(1)], 1, 0)
    with pytest.raises(KafkaError):
        assign_replicas_to_brokers([BrokerMetadata(1)], 0, 1)


def test_racks_on_some_brokers_only_are_refused() -> None:
    with pytest.raises(RackInformationIncomplete):
        assign_replicas_to_brokers([BrokerMetadata(1, "a"), BrokerMetadata(2)], 1, 1)


def test_added_partitions_continue_the_topics_placement() -> None:
    brokers = [BrokerMetadata(b) for b in range(5)]
    existing = assign_replicas_to_brokers(brokers, 3, 3, fixed_start_index=2)
    added = assign_new_partitions(brokers, existing, 6)
    assert sorted(added) == [3, 4, 5]
    all_partitions = {**existing, **added}
    # Continuing from partition 0's preferred leader, as if created together.
    assert all_partitions == assign_replicas_to_brokers(brokers, 6, 3, fixed_start_index=2)
    with pytest.raises(KafkaError) as raised:
        assign_new_partitions(brokers, existing, 3)
    assert raised.value.error_code is ErrorCode.INVALID_PARTITIONS


@given(
    st.dictionaries(
        st.integers(0, 30), st.none() | st.sampled_from("abcd"), min_size=1, max_size=9
    ).filter(lambda racks: len({r is None for r in racks.values()}) == 1),
    st.integers(1, 24),
    st.data(),
)
def test_every_partition_gets_distinct_replicas_spread_over_racks(
    racks: dict[int, str | None], n_partitions: int, data: st.DataObject
) -> None:
    brokers = [BrokerMetadata(b, r) for b, r in racks.items()]
    factor = data.draw(st.integers(1, len(brokers)))
    seed = data.draw(st.integers(0, 2**32))
    assignment = assign_replicas_to_brokers(brokers, n_partitions, factor, rng=random.Random(seed))
    assert sorted(assignment) == list(range(n_partitions))
    n_racks = len({r for r in racks.values() if r is not None})
    for replicas in assignment.values():
        assert len(replicas) == factor == len(set(replicas))
        assert set(replicas) <= set(racks)
        if n_racks:
            assert len({racks[b] for b in replicas}) == min(factor, n_racks)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    if n_partitions % len(brokers) == 0:  # leadership evenly spread
        assert set(leaders.values()) == {n_partitions // len(brokers)}
