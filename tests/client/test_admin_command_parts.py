"""The sans-IO parts of the admin commands: argument parsing and the perf statistics."""

from __future__ import annotations

import pytest

from broker.client.cmd_group_admin import parse_datetime_ms, parse_topic_spec
from broker.client.cmd_perf import LatencyStats
from broker.client.cmd_records import parse_partition
from broker.client.session import ClientError


def test_topic_specs_name_a_topic_or_some_of_its_partitions() -> None:
    assert parse_topic_spec("orders") == ("orders", None)
    assert parse_topic_spec("orders:0,2") == ("orders", [0, 2])
    for bad in (":1", "orders:x"):
        with pytest.raises(ClientError, match="bad --topic"):
            parse_topic_spec(bad)


def test_datetimes_are_iso_8601_with_or_without_a_zone() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01Z") == 1000
    assert parse_datetime_ms("1970-01-01T01:00:02+01:00") == 2000
    with pytest.raises(ClientError, match="expected ISO 8601"):
        parse_datetime_ms("yesterday")


def test_partitions_are_topic_colon_number() -> None:
    assert parse_partition("a:b:3") == ("a:b", 3)
    for bad in ("orders", "orders:-1", ":0"):
        with pytest.raises(ClientError, match="expected TOPIC:PARTITION"):
            parse_partition(bad)


def test_latency_percentiles_are_weighted_by_records() -> None:
    stats = LatencyStats()
    stats.add(1.0, 90, 900)  # a batch of 90 records acknowledged after 1 ms
    stats.add(10.0, 9, 90)
    stats.add(100.0, 1, 10)
    summary = stats.summary(2.0)
    assert (summary["p50_ms"], summary["p95_ms"], summary["p99_ms"]) == (1.0, 10.0, 10.0)
    assert summary["max_latency_ms"] == summary["p999_ms"] == 100.0
    assert summary["avg_latency_ms"] == round((90 + 90 + 100) / 100, 2)
    assert summary["records_per_sec"] == 50.0
    assert LatencyStats().summary(1.0)["p99_ms"] == 0.0
