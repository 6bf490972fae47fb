"""Where a transaction's markers go in a cluster, and how undelivered ones are retried
(a fake sender plays the other processes; the local writes are recorded)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
import trio
import trio.lowlevel

from broker.errors import KafkaError, PeerUnavailable
from broker.handlers.write_txn_markers import GROUP_MARKER_TOPIC
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from broker.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from broker.transaction.marker_router import RoutingMarkerWriter, route_markers

LEADERS = {("t", 0): 1, ("t", 1): 2, ("t", 2): 3, ("u", 0): 2}
GROUP_SHARDS = {"g0": 0, "g1": 1, "g2": 2}


def leader_of(topic: str, partition: int) -> int | None:
    return LEADERS.get((topic, partition))


def test_markers_are_split_by_leader_and_groups_by_coordinator() -> None:
    route = route_markers(
        [("t", 0), ("t", 1), ("t", 2), ("u", 0), ("gone", 0)],
        ["g0", "g1", "g2"],
        my_node=1,
        leader_of=leader_of,
        group_node=lambda g: 1 + GROUP_SHARDS[g],
    )
    assert route.local_partitions == (("gone", 0), ("t", 0))
    assert route.local_groups == ("g0",)
    assert route.remote_partitions == {2: (("t", 1), ("u", 0)), 3: (("t", 2),)}
    assert route.remote_groups == {2: ("g1",), 3: ("g2",)}


class FakeLocal:
    def __init__(self) -> None:
        self.partitions: list[tuple[int, bool, str, int]] = []
        self.groups: list[tuple[int, bool]] = []

    async def write_partition_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        topic: str,
        index: int,
        coordinator_epoch: int = 0,
    ) -> None:
        self.partitions.append((producer_id, commit, topic, index))

    async def write_group_marker(self, producer_id: int, epoch: int, commit: bool) -> None:
        self.groups.append((producer_id, commit))


class FakeSender:
    """Node 3 is down for its first `down_for` requests; node 2 answers
    NOT_LEADER_OR_FOLLOWER once for ("u", 0)."""

    def __init__(self, down_for: int) -> None:
        self.down_for = down_for
        self.requests: list[tuple[int, WriteTxnMarkersRequest]] = []
        self.delivered: list[tuple[int, str, int]] = []
        self._refused_once = False

    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        self.requests.append((node, request))
        await trio.lowlevel.checkpoint()
        if node == 3 and self.down_for > 0:
            self.down_for -= 1
            raise PeerUnavailable("node 3 is restarting")
        results = []
        for marker in request.markers:
            topics = []
            for topic in marker.topics:
                parts = []
                for index in topic.partition_indexes:
                    error = ErrorCode.NONE
                    if (topic.name, index) == ("u", 0) and not self._refused_once:
                        self._refused_once = True
                        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    else:
                        self.delivered.append((node, topic.name, index))
                    parts.append(WritableTxnMarkerPartitionResult(index, error))
                topics.append(WritableTxnMarkerTopicResult(topic.name, tuple(parts)))
            results.append(WritableTxnMarkerResult(marker.producer_id, tuple(topics)))
        return WriteTxnMarkersResponse(markers=tuple(results))


def writer(local: FakeLocal, sender: FakeSender, timeout_s: float = 30.0) -> RoutingMarkerWriter:
    return RoutingMarkerWriter(
        local,  # type: ignore[arg-type]  # the two methods the router calls
        sender,
        my_node=1,
        leader_of=leader_of,
        group_shard=lambda g: GROUP_SHARDS[g],
        base_node=1,
        delivery_timeout_s=timeout_s,
    )


async def write(
    w: RoutingMarkerWriter, partitions: Iterable[tuple[str, int]], groups: Iterable[str]
) -> None:
    await w.write_markers(42, 3, True, partitions, groups)


async def test_every_marker_is_delivered_once_the_restarting_process_answers(
    autojump_clock: trio.abc.Clock,
) -> None:
    local, sender = FakeLocal(), FakeSender(down_for=4)
    await write(writer(local, sender), list(LEADERS), GROUP_SHARDS)
    assert local.partitions == [(42, True, "t", 0)]
    assert local.groups == [(42, True)]
    assert sorted(sender.delivered) == sorted(
        [
            (2, "t", 1),
            (2, "u", 0),
            (2, GROUP_MARKER_TOPIC, 1),
            (3, "t", 2),
            (3, GROUP_MARKER_TOPIC, 2),
        ]
    )
    # Node 3 was asked until it answered; node 2 again only for what it refused.
    assert [node for node, _ in sender.requests].count(3) == 5
    retried = [r for node, r in sender.requests if node == 2][1]
    assert [(t.name, t.partition_indexes) for t in retried.markers[0].topics] == [("u", (0,))]
    assert all(r.markers[0].producer_epoch == 3 for _, r in sender.requests)


async def test_a_process_down_past_the_delivery_timeout_leaves_the_transaction_prepared(
    autojump_clock: trio.abc.Clock,
) -> None:
    local, sender = FakeLocal(), FakeSender(down_for=10**6)
    with pytest.raises(KafkaError) as raised:
        await write(writer(local, sender, timeout_s=5.0), [("t", 0), ("t", 2)], [])
    assert raised.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "('t', 2)" in str(raised.value)
    assert local.partitions == [(42, True, "t", 0)]
    assert 3 < len(sender.requests) < 20  # backed off, not spinning
