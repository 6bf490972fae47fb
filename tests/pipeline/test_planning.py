"""Offsets JSON, options and partition planning, without Spark."""

from __future__ import annotations

import itertools

import pytest

from broker.pipeline.offsets import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    partitions_from_json,
    plan_ranges,
    rate_limit,
)
from broker.pipeline.options import OptionError, SinkOptions, SourceOptions, StartSpec

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_offsets_json_round_trips_in_sparks_shape() -> None:
    text = '{"a":{"0":23,"1":-2},"b":{"0":-1}}'
    offsets = offsets_from_json(text)
    assert offsets == {("a", 0): 23, ("a", 1): -2, ("b", 0): -1}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets
    assert offsets_to_json({("b", 1): 5, ("a", 10): 1, ("a", 2): 0}) == (
        '{"a":{"2":0,"10":1},"b":{"1":5}}'
    )


@pytest.mark.parametrize("bad", ["[1, 2]", '{"a": 5}', '{"a": {"x": 1}}', '{"a": {"0": "1"}}'])
def test_malformed_offsets_json_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        offsets_from_json(bad)


def test_assign_lists_partitions_per_topic() -> None:
    assert partitions_from_json('{"a": [0, 2], "b": [1]}') == [("a", 0), ("a", 2), ("b", 1)]
    with pytest.raises(ValueError):
        partitions_from_json('{"a": "0"}')


def test_options_parse_sparks_kafka_names_case_insensitively() -> None:
    options = SourceOptions.parse(
        {
            **BASE,
            "subscribe": "a, b",
            "startingoffsets": '{"a": {"0": 5}}',
            "maxOffsetsPerTrigger": "100",
            "minpartitions": "4",
            "includeHeaders": "true",
            "failOnDataLoss": "false",
        },
        streaming=True,
    )
    assert options.subscribe == ("a", "b")
    assert options.starting == StartSpec("offsets", {("a", 0): 5})
    assert options.max_offsets_per_trigger == 100
    assert options.min_partitions == 4
    assert options.include_headers and not options.fail_on_data_loss


def test_streaming_starts_at_latest_and_batch_at_earliest_by_default() -> None:
    assert SourceOptions.parse({**BASE, "subscribe": "a"}, streaming=True).starting.kind == "latest"
    batch = SourceOptions.parse({**BASE, "subscribepattern": "a.*"}, streaming=False)
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"


def test_starting_timestamp_is_parsed() -> None:
    options = SourceOptions.parse(
        {**BASE, "assign": '{"a": [0]}', "startingtimestamp": "1000"}, streaming=True
    )
    assert options.starting == StartSpec("timestamp", timestamp=1000)
    assert options.assign == (("a", 0),)


@pytest.mark.parametrize(
    ("extra", "streaming"),
    [
        ({}, True),  # no subscription
        ({"subscribe": "a", "assign": '{"a": [0]}'}, True),  # two subscriptions
        ({"subscribe": "a", "maxoffsetspertrigger": "0"}, True),
        ({"subscribe": "a", "failondataloss": "maybe"}, True),
        ({"subscribe": "a", "startingoffsets": "latest"}, False),
        ({"subscribe": "a", "endingoffsets": "latest"}, True),
        ({"subscribe": "a", "startingoffsets": "{nope"}, True),
        ({"subscribepattern": "("}, True),
    ],
)
def test_invalid_source_options_are_refused_clearly(extra: dict[str, str], streaming: bool) -> None:
    with pytest.raises(OptionError):
        SourceOptions.parse({**BASE, **extra}, streaming=streaming)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(OptionError, match="bootstrap"):
        SourceOptions.parse({"subscribe": "a"}, streaming=True)
    with pytest.raises(OptionError, match="bootstrap"):
        SinkOptions.parse({"topic": "a"})


def test_rate_limit_shares_the_limit_in_proportion_to_backlog() -> None:
    start = {("a", 0): 0, ("a", 1): 0, ("a", 2): 100}
    until = {("a", 0): 300, ("a", 1): 100, ("a", 2): 100}
    limited = rate_limit(100, start, until)
    assert limited == {("a", 0): 75, ("a", 1): 25, ("a", 2): 100}


def test_rate_limit_does_not_starve_small_partitions() -> None:
    start = {("a", 0): 0, ("a", 1): 0}
    until = {("a", 0): 10_000, ("a", 1): 1}
    limited = rate_limit(10, start, until)
    assert limited[("a", 1)] == 1
    assert limited[("a", 0)] == 9


def test_rate_limit_never_passes_the_end() -> None:
    assert rate_limit(1000, {("a", 0): 5}, {("a", 0): 8}) == {("a", 0): 8}


def test_one_range_per_partition_with_data() -> None:
    ranges = plan_ranges({("a", 0): 0, ("a", 1): 5}, {("a", 0): 10, ("a", 1): 5})
    assert ranges == [OffsetRange("a", 0, 0, 10)]


def test_min_partitions_splits_large_ranges_and_keeps_small_ones_whole() -> None:
    start = {("a", 0): 0, ("a", 1): 0}
    end = {("a", 0): 1000, ("a", 1): 10}
    ranges = plan_ranges(start, end, min_partitions=4)
    assert OffsetRange("a", 1, 0, 10) in ranges
    big = sorted((r for r in ranges if r.partition == 0), key=lambda r: r.start)
    assert len(big) == 3
    assert big[0].start == 0 and big[-1].end == 1000
    assert all(x.end == y.start for x, y in itertools.pairwise(big))
    assert sum(r.size for r in ranges) == 1010


def test_new_partitions_missing_from_start_read_nothing_in_planning() -> None:
    assert plan_ranges({}, {("a", 0): 10}) == []
