"""The replica admin APIs on a broker alone, where each partition has one replica, its
leader: nothing to elect, nowhere to move it, and its log dir described."""

from __future__ import annotations

from pathlib import Path

from broker.client.connection import KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from broker.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from broker.protocol.messages.elect_leaders_request import TopicPartitions
from tests.integration.broker_harness import running_broker


async def test_a_broker_alone_elects_nothing_moves_nothing_and_describes_its_log_dir(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server:
        await server.log_manager.create_topic("solo", 2)
        log = server.log_manager.partition("solo", 1)
        assert log is not None
        async with await KafkaConnection.connect(
            "127.0.0.1", server.bound_port(), "t"
        ) as connection:
            wanted = (TopicPartitions(topic="solo", partitions=(1, 5)),)
            elected = await connection.request(
                ElectLeadersRequest(election_type=0, topic_partitions=wanted), 2
            )
            outcome = {
                p.partition_id: p.error_code
                for p in elected.replica_election_results[0].partition_result
            }
            assert outcome == {
                1: ErrorCode.ELECTION_NOT_NEEDED,
                5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }

            move = ReassignableTopic(
                name="solo", partitions=(ReassignablePartition(partition_index=0, replicas=(2,)),)
            )
            altered = await connection.request(
                AlterPartitionReassignmentsRequest(topics=(move,)), 0
            )
            (result,) = altered.responses[0].partitions
            assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            listed = await connection.request(ListPartitionReassignmentsRequest(), 0)
            assert (listed.error_code, listed.topics) == (ErrorCode.NONE, ())

            described = await connection.request(DescribeLogDirsRequest(topics=None), 4)
        (log_dir,) = described.results
        assert Path(log_dir.log_dir).name == tmp_path.name
        (topic,) = [t for t in log_dir.topics if t.name == "solo"]
        sizes = {p.partition_index: (p.partition_size, p.offset_lag) for p in topic.partitions}
        assert sizes == {0: (0, 0), 1: (log.size_bytes, 0)}
