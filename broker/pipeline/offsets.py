"""Offsets in Spark's Kafka JSON shape and the planning of micro-batches.

Offsets are ``{"topic": {"0": 584, "1": 596}}`` (partition numbers as strings,
as JSON requires); -2 means earliest and -1 latest where a user writes them.
Rate limiting and the splitting of ranges by ``minPartitions`` follow Spark's
``KafkaMicroBatchStream.rateLimit`` and ``KafkaOffsetRangeCalculator``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import attrs

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1


def offsets_from_json(value: str | Mapping[str, Any]) -> PartitionOffsets:
    """Parse ``{"topic": {"0": 23}}`` (a JSON string or the decoded dict)."""
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a JSON object of topics, got {value!r}")
    result: PartitionOffsets = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"expected an object of partitions for topic {topic!r}")
        for partition, offset in partitions.items():
            try:
                p = int(partition)
            except ValueError:
                raise ValueError(f"partition {partition!r} of {topic!r} is not a number") from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(f"offset of {topic}-{p} is not an integer: {offset!r}")
            result[(str(topic), p)] = offset
    return result


def offsets_to_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The JSON-able dict, topics and partitions in a stable order."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(offsets_to_dict(offsets), separators=(",", ":"))


def partitions_from_json(value: str) -> list[TopicPartition]:
    """``assign``: ``{"topicA": [0, 1], "topicB": [2]}``."""
    data = json.loads(value)
    if not isinstance(data, Mapping):
        raise ValueError(f"assign must be a JSON object of topic to partitions, got {value!r}")
    result: list[TopicPartition] = []
    for topic, partitions in data.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in partitions
        ):
            raise ValueError(f"assign: partitions of {topic!r} must be a list of integers")
        result.extend((str(topic), p) for p in partitions)
    if not result:
        raise ValueError("assign names no partitions")
    return result


def rate_limit(
    limit: int, start: Mapping[TopicPartition, int], until: Mapping[TopicPartition, int]
) -> PartitionOffsets:
    """At most about ``limit`` records, shared in proportion to each partition's backlog.

    Spark's rule: each partition gets ``limit * size / total``, rounded down but at
    least one record so small partitions are not starved, never past its end.
    Partitions missing from ``start`` start at their ``until`` (nothing to read).
    """
    sizes = {
        tp: end - start[tp] for tp, end in until.items() if tp in start and end - start[tp] > 0
    }
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    result: PartitionOffsets = {}
    for tp, end in until.items():
        size = sizes.get(tp)
        if size is None:
            result[tp] = end
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        result[tp] = min(end, start[tp] + share)
    return result


@attrs.frozen
class OffsetRange:
    """One input partition: offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """One range per topic-partition with data, split further to reach ``min_partitions``.

    Like Spark's KafkaOffsetRangeCalculator: ranges too small to split keep their
    own partition and are left out of the proportional share of the big ones.
    """
    ranges = [
        OffsetRange(topic, partition, start.get((topic, partition), stop), stop)
        for (topic, partition), stop in sorted(end.items())
    ]
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, total_size: int, parts: int) -> int:
        return max(_round_half_up(size / total_size * parts), 1)

    unsplit = [r for r in ranges if part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    unsplit_ids = {(r.topic, r.partition) for r in unsplit}
    result = []
    for r in ranges:
        parts = (
            1
            if (r.topic, r.partition) in unsplit_ids
            else part_count(r.size, split_total, split_min)
        )
        remaining = r.size
        begin = r.start
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            stop = min(begin + this, r.end)
            if stop > begin:
                result.append(OffsetRange(r.topic, r.partition, begin, stop))
            begin = stop
    return result


def _round_half_up(value: float) -> int:
    """Scala's ``math.round`` (half up), not Python's banker's rounding."""
    return math.floor(value + 0.5)
