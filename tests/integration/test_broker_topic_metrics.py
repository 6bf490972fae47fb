"""BrokerTopicMetrics count what producers send and consumers receive, per topic and in total."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

from broker.server import KafkaServer
from tests.integration.broker_harness import running_broker

ENV = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


def meter_count(server: KafkaServer, name: str, **tags: str) -> float:
    wanted = tuple(sorted(tags.items()))
    values = [
        s.values["count"]
        for s in server.metrics.snapshot()
        if s.type_ == "BrokerTopicMetrics" and s.name == name and s.tags == wanted
    ]
    assert len(values) == 1, (name, tags)
    return values[0]


async def client(server: KafkaServer, *args: str, stdin: bytes = b"") -> bytes:
    command = [sys.executable, "-m", "broker.client", *args]
    command += ["-b", f"127.0.0.1:{server.bound_port()}"]
    with trio.fail_after(60):
        result = await trio.run_process(
            command, stdin=stdin, capture_stdout=True, capture_stderr=True, env=ENV
        )
    return result.stdout


async def test_bytes_and_messages_in_and_out_are_metered_per_topic_and_in_total(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"metrics.port": "-1"}) as server:
        await client(server, "topics", "create", "metered")
        await client(server, "topics", "create", "other")
        lines = b"".join(b"record-%03d\n" % i for i in range(50))
        await client(server, "produce", "metered", "--batch-size", "10", stdin=lines)
        await client(server, "produce", "other", stdin=b"x\n")
        consumed = await client(server, "consume", "metered", "--from-beginning", "-e")
        assert consumed == lines

        partition = server.log_manager.partition("metered", 0)
        assert partition is not None
        stored = partition.size_bytes
        assert meter_count(server, "MessagesInPerSec", topic="metered") == 50
        assert meter_count(server, "BytesInPerSec", topic="metered") == stored
        assert meter_count(server, "BytesOutPerSec", topic="metered") == stored
        assert meter_count(server, "MessagesInPerSec") == 51
        other = meter_count(server, "BytesInPerSec", topic="other")
        assert meter_count(server, "BytesInPerSec") == stored + other


def log_gauge(server: KafkaServer, name: str, topic: str, partition: int) -> float:
    wanted = (("partition", str(partition)), ("topic", topic))
    values = [
        s.values["value"]
        for s in server.metrics.snapshot()
        if (s.group, s.type_, s.name, s.tags) == ("kafka.log", "Log", name, wanted)
    ]
    assert len(values) == 1, (name, topic, partition)
    return values[0]


async def test_each_partition_reports_its_log_size_and_offsets(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "-1"}) as server:
        await client(server, "topics", "create", "sized", "--partitions", "2")
        await client(server, "produce", "sized", "-p", "1", stdin=b"a\nb\nc\n")
        partition = server.log_manager.partition("sized", 1)
        assert partition is not None
        assert log_gauge(server, "LogEndOffset", "sized", 1) == 3
        assert log_gauge(server, "LogEndOffset", "sized", 0) == 0
        assert log_gauge(server, "Size", "sized", 1) == partition.size_bytes > 0
        assert log_gauge(server, "LogStartOffset", "sized", 1) == 0
        assert log_gauge(server, "NumLogSegments", "sized", 1) == 1
        await client(server, "topics", "delete", "sized")
        names = {s.tags for s in server.metrics.snapshot() if s.type_ == "Log"}
        assert not any(("topic", "sized") in tags for tags in names)


async def test_a_deleted_topics_meters_leave_and_the_totals_keep_their_counts(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"metrics.port": "-1"}) as server:
        await client(server, "topics", "create", "doomed")
        await client(server, "produce", "doomed", stdin=b"a\nb\n")
        assert meter_count(server, "MessagesInPerSec", topic="doomed") == 2
        await client(server, "topics", "delete", "doomed")
        per_topic = [s for s in server.metrics.snapshot() if ("topic", "doomed") in s.tags]
        assert per_topic == []
        assert meter_count(server, "MessagesInPerSec") == 2
        await client(server, "topics", "create", "doomed")
        await client(server, "produce", "doomed", stdin=b"c\n")
        assert meter_count(server, "MessagesInPerSec", topic="doomed") == 1


def group_gauges(server: KafkaServer, group: str) -> dict[tuple[str, str, int], float]:
    return {
        (s.name, dict(s.tags)["topic"], int(dict(s.tags)["partition"])): s.values["value"]
        for s in server.metrics.snapshot()
        if s.type_ == "ConsumerGroupLag" and dict(s.tags)["group"] == group
    }


async def test_each_group_reports_committed_offset_and_lag_per_partition(
    tmp_path: Path,
) -> None:
    from broker.protocol.messages import OffsetCommitRequest
    from broker.protocol.messages.offset_commit_request import (
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from tests.integration.broker_harness import connect

    async with running_broker(tmp_path, {"metrics.port": "-1"}) as server:
        await client(server, "topics", "create", "lagged", "--partitions", "2")
        await client(server, "produce", "lagged", "-p", "0", stdin=b"a\nb\nc\nd\ne\n")
        await client(server, "produce", "lagged", "-p", "1", stdin=b"x\n")
        assert group_gauges(server, "readers") == {}
        async with await connect(server) as conn:
            response = await conn.request(
                OffsetCommitRequest(
                    group_id="readers",
                    topics=(
                        OffsetCommitRequestTopic(
                            name="lagged",
                            partitions=(
                                OffsetCommitRequestPartition(0, committed_offset=3),
                                OffsetCommitRequestPartition(1, committed_offset=1),
                            ),
                        ),
                    ),
                ),
                7,
            )
        assert [p.error_code for p in response.topics[0].partitions] == [0, 0]
        assert group_gauges(server, "readers") == {
            ("CommittedOffset", "lagged", 0): 3,
            ("Lag", "lagged", 0): 2,
            ("CommittedOffset", "lagged", 1): 1,
            ("Lag", "lagged", 1): 0,
        }
        await client(server, "produce", "lagged", "-p", "1", stdin=b"y\nz\n")
        assert group_gauges(server, "readers")[("Lag", "lagged", 1)] == 2
