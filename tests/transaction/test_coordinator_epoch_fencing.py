"""A transaction coordinator that has been replaced (its host paused or cut off while it
wrote markers, then back) must not close the producer's next transaction with its late
markers: the producer's transactions share one producer epoch, so only the coordinator
epoch (the leader epoch of `__transaction_state` the coordinator loaded at, as in Kafka)
tells the late marker from the new coordinator's. Partition leaders keep the last
marker's coordinator epoch per producer, across restarts and on followers, and refuse
older ones with TRANSACTION_COORDINATOR_FENCED; the marker router stops at that answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.errors import KafkaError
from broker.log.partition_log import PartitionLog
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from broker.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from broker.transaction.marker_router import RoutingMarkerWriter
from tests.cluster.test_marker_router import FakeLocal
from tests.log.helpers import config, crash, open_manager
from tests.log.test_transactional_log import append_txn, committed_values, reopened

PRODUCER, EPOCH = 9, 2
OLD_COORDINATOR, NEW_COORDINATOR = 3, 4


async def late_marker_refused(log: PartitionLog) -> None:
    with pytest.raises(KafkaError) as caught:
        await log.append_control(PRODUCER, EPOCH, commit=True, coordinator_epoch=OLD_COORDINATOR)
    assert caught.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED


async def test_a_late_marker_of_a_replaced_coordinator_leaves_the_next_transaction_open(
    tmp_path: Path,
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_txn(log, PRODUCER, [b"first"], epoch=EPOCH)
        await log.append_control(PRODUCER, EPOCH, commit=True, coordinator_epoch=NEW_COORDINATOR)
        second, _ = await append_txn(log, PRODUCER, [b"second"], epoch=EPOCH, seq=1)
        await late_marker_refused(log)
        assert log.last_stable_offset == second  # the second transaction is still open
        await log.append_control(PRODUCER, EPOCH, commit=False, coordinator_epoch=NEW_COORDINATOR)
        assert await committed_values(log) == [b"first"]


@pytest.mark.parametrize("clean", [True, False], ids=["snapshot", "log replayed"])
async def test_the_coordinator_epoch_is_known_again_after_a_restart(
    tmp_path: Path, clean: bool
) -> None:
    cfg = config(tmp_path)
    async with open_manager(cfg) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_txn(log, PRODUCER, [b"first"], epoch=EPOCH)
        await log.append_control(PRODUCER, EPOCH, commit=True, coordinator_epoch=NEW_COORDINATOR)
        await append_txn(log, PRODUCER, [b"second"], epoch=EPOCH, seq=1)
        if not clean:
            crash(manager)
    async with open_manager(cfg) as manager:
        await late_marker_refused(reopened(manager, "t", 0))


class FencingSender:
    """Every partition answers that a newer coordinator has written markers there."""

    def __init__(self) -> None:
        self.requests: list[WriteTxnMarkersRequest] = []

    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        fenced = ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return WriteTxnMarkersResponse(
            markers=tuple(
                WritableTxnMarkerResult(
                    m.producer_id,
                    tuple(
                        WritableTxnMarkerTopicResult(
                            t.name,
                            tuple(
                                WritableTxnMarkerPartitionResult(p, fenced)
                                for p in t.partition_indexes
                            ),
                        )
                        for t in m.topics
                    ),
                )
                for m in request.markers
            )
        )


async def test_the_router_stops_at_once_when_a_leader_fences_its_coordinator_epoch(
    autojump_clock: trio.abc.Clock,
) -> None:
    sender = FencingSender()
    markers = RoutingMarkerWriter(
        FakeLocal(),  # type: ignore[arg-type]  # the two methods the router calls
        sender,
        my_node=1,
        leader_of=lambda topic, index: 2,
        group_shard=lambda group: 0,
        base_node=1,
    )
    started = trio.current_time()
    with pytest.raises(KafkaError) as caught:
        await markers.write_markers(
            PRODUCER, EPOCH, True, [("t", 0)], [], coordinator_epoch=OLD_COORDINATOR
        )
    assert caught.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert trio.current_time() == started  # not retried until the delivery deadline
    (request,) = sender.requests
    assert request.markers[0].coordinator_epoch == OLD_COORDINATOR
