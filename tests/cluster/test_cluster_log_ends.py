"""A host's supervisor joins consumer lag over the whole cluster: the log ends of the
partitions none of its processes lead are asked of the cluster (ListOffsets), bounded
and cached (broker/cluster/cluster_log_ends.py). The cluster here is a fake session;
the real one: tests/hosts/test_host_supervisors.py."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from broker.cluster import cluster_log_ends
from broker.cluster.cluster_log_ends import (
    ASK_TIMEOUT_S,
    CACHE_S,
    ClusterLogEnds,
    OffsetsSession,
)
from broker.cluster.cluster_metrics import LAG, join_families
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.list_offsets_request import ListOffsetsRequest
from broker.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

COORDINATOR = (
    'kafka_server_consumergrouplag_committedoffset{group="g",partition="0",topic="t"} 4\n'
    'kafka_server_consumergrouplag_committedoffset{group="g",partition="1",topic="t"} 7\n'
    'kafka_server_consumergrouplag_committedoffset{group="g",partition="2",topic="t"} 1\n'
    'kafka_log_log_logendoffset{partition="0",topic="t"} 10\n'
)


@attrs.define
class FakeCluster:
    """Answers ListOffsets with `ends` (a partition missing: NOT_LEADER_OR_FOLLOWER)."""

    ends: dict[tuple[str, int], int]
    asked: list[set[tuple[str, int]]] = attrs.field(factory=list)
    hang: bool = False
    refuse: bool = False
    closed: int = 0

    async def open(self, address: str, timeout_s: float) -> OffsetsSession:
        assert address == "127.0.0.2:9092"
        if self.refuse:
            raise OSError("connection refused")
        return FakeSession(self)


@attrs.define
class FakeSession:
    cluster: FakeCluster

    def version_for(self, api_key: int, minimum: int = 0, maximum: int | None = None) -> int:
        assert api_key == ListOffsetsRequest.API_KEY
        return max(minimum, 7)

    async def request(self, body: Any, version: int, timeout_s: float = 30.0) -> Any:
        assert isinstance(body, ListOffsetsRequest)
        if self.cluster.hang:
            await trio.sleep_forever()
        keys = {(t.name, p.partition_index) for t in body.topics for p in t.partitions}
        assert all(p.timestamp == -1 for t in body.topics for p in t.partitions)  # latest
        self.cluster.asked.append(keys)
        return ListOffsetsResponse(
            topics=tuple(
                ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=tuple(
                        ListOffsetsPartitionResponse(
                            partition_index=p.partition_index,
                            error_code=0
                            if (t.name, p.partition_index) in self.cluster.ends
                            else ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            offset=self.cluster.ends.get((t.name, p.partition_index), -1),
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )

    async def aclose(self) -> None:
        self.cluster.closed += 1


def cluster_ends(cluster: FakeCluster) -> ClusterLogEnds:
    return ClusterLogEnds(lambda: "127.0.0.2:9092", cluster.open)


async def test_lag_of_a_partition_led_on_another_host_comes_from_the_end_the_cluster_gives() -> (
    None
):
    cluster = FakeCluster({("t", 1): 9})
    families = await join_families({1: COORDINATOR, 2: None}, cluster_ends(cluster))
    lag = {s.labels["partition"]: s.value for f in families if f.name == LAG for s in f.samples}
    # Partition 0 from the process's own log end; 1 from the cluster; 2 unanswered: none.
    assert lag == {"0": 6.0, "1": 2.0}
    assert cluster.asked == [{("t", 1), ("t", 2)}]  # only what no process here leads
    assert cluster.closed == 1


async def test_the_cluster_is_asked_at_most_once_per_cache_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = FakeCluster({("t", 1): 9})
    ends = cluster_ends(cluster)
    async with trio.open_nursery() as nursery:  # concurrent scrapes
        for _ in range(3):
            nursery.start_soon(ends.ends, {("t", 1)})
    assert await ends.ends({("t", 1)}) == {("t", 1): 9}
    assert len(cluster.asked) == 1
    # A partition not asked for last time is asked at once.
    assert await ends.ends({("t", 1), ("t", 2)}) == {("t", 1): 9}
    assert len(cluster.asked) == 2
    cluster.ends[("t", 1)] = 12
    await trio.sleep(CACHE_S)
    assert await ends.ends({("t", 1)}) == {("t", 1): 12}
    assert len(cluster.asked) == 3


async def test_a_cluster_that_does_not_answer_leaves_the_lag_out_logged_once(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster({("t", 1): 9}, hang=True)
    ends = cluster_ends(cluster)
    started = trio.current_time()
    with caplog.at_level(logging.WARNING, logger=cluster_log_ends.__name__):
        assert await ends.ends({("t", 1)}) == {}
        assert trio.current_time() - started == pytest.approx(ASK_TIMEOUT_S)
        assert cluster.closed == 1
        cluster.hang, cluster.refuse = False, True
        await trio.sleep(CACHE_S)
        assert await ends.ends({("t", 1)}) == {}
    assert len([r for r in caplog.records if "not read" in r.getMessage()]) == 1
    cluster.refuse = False
    await trio.sleep(CACHE_S)
    assert await ends.ends({("t", 1)}) == {("t", 1): 9}


async def test_at_most_max_partitions_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_log_ends, "MAX_PARTITIONS", 3)
    cluster = FakeCluster({("t", p): p for p in range(10)})
    found = await cluster_ends(cluster).ends({("t", p) for p in range(10)})
    assert found == {("t", 0): 0, ("t", 1): 1, ("t", 2): 2}
    assert cluster.asked == [{("t", 0), ("t", 1), ("t", 2)}]


async def test_nothing_is_asked_without_a_registered_process_or_a_missing_end() -> None:
    cluster = FakeCluster({})
    assert await ClusterLogEnds(lambda: None, cluster.open).ends({("t", 1)}) == {}
    assert await cluster_ends(cluster).ends(set()) == {}
    assert cluster.asked == []
