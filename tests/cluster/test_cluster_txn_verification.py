"""KIP-890 verification of transactional produce when the partition's leader is not the
process that coordinates the producer's transaction: the leader asks the
coordinator's process (AddPartitionsToTxn v4 verify-only over the private channel),
so a batch for a partition the transaction does not hold is refused there too, and
a batch after the commit marker is refused again, leaving no hanging transaction."""

from __future__ import annotations

from pathlib import Path

from broker.client.connection import KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
)
from broker.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.cluster.test_cluster_transactions import (
    BASE_NODE,
    CLUSTER,
    name_on_shard,
    partition_leaders,
)
from tests.integration.broker_harness import start_broker_process, stop_broker_process
from tests.integration.data_helpers import PRODUCE_VERSION, produce_request
from tests.integration.test_transaction_apis import txn_batch
from tests.interop.kafka_clients import create_topic

TOPIC = "verified"


async def produce_transactional(
    conn: KafkaConnection, tid: str, partition: int, batch: bytes
) -> int:
    request = produce_request(TOPIC, {partition: batch})._replace(transactional_id=tid)
    response = await conn.request(request, PRODUCE_VERSION)
    return int(response.responses[0].partition_responses[0].error_code)


async def add_partition(
    conn: KafkaConnection, tid: str, pid: int, epoch: int, partition: int
) -> int:
    response = await conn.request(
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=TOPIC, partitions=(partition,)),),
        ),
        3,
    )
    return int(
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    )


async def offsets(conn: KafkaConnection, partition: int) -> tuple[int, int]:
    """(log end, last stable offset) of the partition, from its leader."""
    found = []
    for isolation in (0, 1):
        response = await conn.request(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation,
                topics=(
                    ListOffsetsTopic(
                        name=TOPIC,
                        partitions=(ListOffsetsPartition(partition_index=partition, timestamp=-1),),
                    ),
                ),
            ),
            5,
        )
        found.append(int(response.topics[0].partitions[0].offset))
    return found[0], found[1]


async def test_a_leader_in_another_process_verifies_with_the_transactions_coordinator(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", CLUSTER)
    try:
        create_topic(cluster.bootstrap, TOPIC, 3)
        leaders = partition_leaders(cluster.bootstrap, TOPIC)
        tid = name_on_shard("tid", 0)  # coordinated by the first process
        partition = next(p for p, node in sorted(leaders.items()) if node != BASE_NODE)
        ports = cluster.node_ports()
        coordinator = await KafkaConnection.connect("127.0.0.1", ports[BASE_NODE], "verify")
        leader = await KafkaConnection.connect("127.0.0.1", ports[leaders[partition]], "verify")
        async with coordinator, leader:
            init = await coordinator.request(
                InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000), 4
            )
            assert init.error_code == ErrorCode.NONE
            pid, epoch = init.producer_id, init.producer_epoch

            # Not added to the transaction: refused by the leader, nothing appended.
            first = txn_batch([b"a"], pid, epoch, 0)
            assert await produce_transactional(leader, tid, partition, first) == (
                ErrorCode.INVALID_TXN_STATE
            )
            assert await offsets(leader, partition) == (0, 0)

            assert await add_partition(coordinator, tid, pid, epoch, partition) == ErrorCode.NONE
            assert await produce_transactional(leader, tid, partition, first) == ErrorCode.NONE
            second = txn_batch([b"b"], pid, epoch, 1)
            assert await produce_transactional(leader, tid, partition, second) == ErrorCode.NONE
            assert await offsets(leader, partition) == (2, 0)  # open: the LSO waits

            ended = await coordinator.request(
                EndTxnRequest(
                    transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
                ),
                3,
            )
            assert ended.error_code == ErrorCode.NONE
            assert await offsets(leader, partition) == (3, 3)  # two records and the marker

            # After the marker the transaction no longer holds the partition: asked again.
            late = txn_batch([b"c"], pid, epoch, 2)
            assert await produce_transactional(leader, tid, partition, late) == (
                ErrorCode.INVALID_TXN_STATE
            )
            assert await offsets(leader, partition) == (3, 3)  # nothing hangs
    finally:
        assert stop_broker_process(cluster) == 0
