"""A group's members carry on when its coordinator process is killed and restarted: the
group's generation and members come back from its GroupMetadata record (Kafka keeps them
in `__consumer_offsets`), so the next commit and heartbeat are accepted, not answered
UNKNOWN_MEMBER_ID with the whole group rejoining."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

import trio

from broker.client.connection import KafkaConnection
from broker.cluster.placement import coordinator_shard
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from broker.protocol.messages.join_group_request import JoinGroupRequestProtocol
from broker.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from tests.cluster.test_supervisor import child_pids
from tests.coordinator.helpers import subscription
from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)
from tests.interop.kafka_clients import create_topic
from tests.waiting import wait_until

CLUSTER = {
    "process.count": "3",
    "num.network.threads": "1",
    "num.io.threads": "2",
    "group.initial.rebalance.delay.ms": "0",
}
GROUP = "survivors"
TOPIC = "kept"
RETRIABLE = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


def registrations(cluster: BrokerProcess, node: int) -> int:
    pattern = rf"node {node} registered in the cluster at "
    return len(re.findall(pattern, cluster.log_text()))


def commit_request(generation: int, member_id: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=(
            OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=(
                    OffsetCommitRequestPartition(partition_index=0, committed_offset=offset),
                ),
            ),
        ),
    )


async def join_and_sync(port: int) -> tuple[str, int]:
    async with await KafkaConnection.connect("127.0.0.1", port) as connection:
        first = await connection.request(join_request(""), 5)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await connection.request(join_request(first.member_id), 5)
        assert joined.error_code == ErrorCode.NONE
        synced = await connection.request(
            SyncGroupRequest(
                group_id=GROUP,
                generation_id=joined.generation_id,
                member_id=joined.member_id,
                assignments=(
                    SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a"),
                ),
            ),
            3,
        )
        assert synced.error_code == ErrorCode.NONE
        committed = await connection.request(
            commit_request(joined.generation_id, joined.member_id, 1), 7
        )
        assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
        return joined.member_id, joined.generation_id


def join_request(member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=60_000,
        rebalance_timeout_ms=30_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=subscription(TOPIC)),),
    )


async def commit_after_restart(
    cluster: BrokerProcess, node: int, member: str, generation: int
) -> tuple[ErrorCode, ErrorCode]:
    """The member's next commit and heartbeat, once the restarted coordinator answers."""
    error = beat = ErrorCode.COORDINATOR_NOT_AVAILABLE
    with trio.move_on_after(30):
        while error in RETRIABLE:
            try:
                port = cluster.node_ports()[node]
                async with await KafkaConnection.connect("127.0.0.1", port) as connection:
                    answer = await connection.request(commit_request(generation, member, 2), 7)
                    error = ErrorCode(answer.topics[0].partitions[0].error_code)
                    heartbeat = HeartbeatRequest(
                        group_id=GROUP, generation_id=generation, member_id=member
                    )
                    if error not in RETRIABLE:
                        beat = ErrorCode((await connection.request(heartbeat, 4)).error_code)
            except OSError:
                pass
            if error in RETRIABLE:
                await trio.sleep(0.1)
    return error, beat


async def test_a_killed_coordinator_restarts_with_its_groups_members(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        create_topic(cluster.bootstrap, TOPIC, 1)
        node = 1 + coordinator_shard(GROUP, 3)
        member, generation = await join_and_sync(cluster.node_ports()[node])
        before = registrations(cluster, node)
        os.kill(child_pids(cluster.process.pid)[node - 1], signal.SIGKILL)
        with contextlib.suppress(trio.TooSlowError):
            await wait_until(lambda: registrations(cluster, node) != before, 30, 0.05)
        assert registrations(cluster, node) > before, "the killed process did not come back"
        assert await commit_after_restart(cluster, node, member, generation) == (
            ErrorCode.NONE,
            ErrorCode.NONE,
        )
    finally:
        assert stop_broker_process(cluster) == 0
