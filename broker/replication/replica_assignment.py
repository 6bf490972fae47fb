"""Where a partition's replicas go (Kafka's AdminUtils.assignReplicasToBrokers).

Kafka's placement, so a cluster migrated from Kafka (or read by its tools)
looks the way an operator expects: the first replicas (the preferred leaders)
go round-robin from a start index, so leadership spreads over brokers; the
followers follow at a shift that grows by one each time the partitions wrap
around the brokers, so one broker's failure spreads its followers' load. With
racks, brokers are first listed alternating between racks, and a follower goes
to a rack (then a broker) without a replica of the partition while one remains.
The random start index and shift are passed in, so tests are deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import attrs

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode


@attrs.frozen(order=True)
class BrokerMetadata:
    broker_id: int
    rack: str | None = None


class RackInformationIncomplete(ValueError):
    """Some brokers have `broker.rack` and some do not: Kafka refuses rack-aware
    placement then, rather than crowd the rackless brokers."""


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas (the first is the preferred leader)."""
    if n_partitions <= 0:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        )
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers:"
            f" {len(brokers)}.",
        )
    ordered = sorted(brokers)
    racks = [b.rack for b in ordered]
    if all(rack is None for rack in racks):
        broker_list = [b.broker_id for b in ordered]
        rack_of: Mapping[int, str] | None = None
    elif any(rack is None for rack in racks):
        raise RackInformationIncomplete(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    else:
        rack_of = {b.broker_id: b.rack for b in ordered if b.rack is not None}
        broker_list = rack_alternated_broker_list(rack_of)
    chooser = rng or random.Random()
    count = len(broker_list)
    start_index = fixed_start_index if fixed_start_index >= 0 else chooser.randrange(count)
    shift = fixed_start_index if fixed_start_index >= 0 else chooser.randrange(count)
    assignment: dict[int, tuple[int, ...]] = {}
    partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition_id > 0 and partition_id % count == 0:
            shift += 1
        first = (partition_id + start_index) % count
        if rack_of is None:
            followers = [
                broker_list[_replica_index(first, shift, j, count)]
                for j in range(replication_factor - 1)
            ]
            assignment[partition_id] = (broker_list[first], *followers)
        else:
            assignment[partition_id] = _rack_aware_replicas(
                broker_list, rack_of, first, shift, replication_factor
            )
        partition_id += 1
    return assignment


def rack_alternated_broker_list(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn (racks sorted, brokers by id within a rack):
    {1:a, 2:a, 3:b, 4:c, 5:c} -> [1, 3, 4, 2, 5]."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(rack_of):
        by_rack.setdefault(rack_of[broker_id], []).append(broker_id)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(rack_of):
        result += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return result


def assign_new_partitions(
    brokers: Sequence[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    *,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """CreatePartitions: the added partitions continue the topic's placement (Kafka starts
    at the index of partition 0's preferred leader, with partition 0's replication factor)."""
    if new_total <= len(existing):
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {len(existing)} partitions, {new_total} would not be an increase.",
        )
    first_replicas = existing[0]
    ordered_ids = [b.broker_id for b in sorted(brokers)]
    start_index = next(
        (i for i, broker_id in enumerate(ordered_ids) if broker_id >= first_replicas[0]), 0
    )
    return assign_replicas_to_brokers(
        brokers,
        new_total - len(existing),
        len(first_replicas),
        fixed_start_index=start_index,
        start_partition_id=len(existing),
        rng=rng,
    )


def _replica_index(first: int, shift: int, j: int, count: int) -> int:
    return (first + 1 + (shift + j) % (count - 1)) % count


def _rack_aware_replicas(
    broker_list: Sequence[int],
    rack_of: Mapping[int, str],
    first: int,
    shift: int,
    replication_factor: int,
) -> tuple[int, ...]:
    count = len(broker_list)
    n_racks = len(set(rack_of.values()))
    leader = broker_list[first]
    replicas = [leader]
    racks_with_replicas = {rack_of[leader]}
    k = 0
    while len(replicas) < replication_factor:
        broker = broker_list[_replica_index(first, shift * n_racks, k, count)]
        rack = rack_of[broker]
        k += 1
        rack_ok = rack not in racks_with_replicas or len(racks_with_replicas) == n_racks
        broker_ok = broker not in replicas or len(replicas) == count
        if rack_ok and broker_ok:
            replicas.append(broker)
            racks_with_replicas.add(rack)
    return tuple(replicas)
