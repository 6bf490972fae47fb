"""The transaction APIs over real sockets with our own client: what a Kafka client
sees on the wire (aborted_transactions, last stable offsets, UNSTABLE_OFFSET_COMMIT,
verification of transactional produce, the advertised versions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.client.connection import KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ApiVersionsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from broker.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from broker.protocol.messages.describe_producers_request import TopicRequest
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from broker.protocol.messages.offset_fetch_request import OffsetFetchRequestTopic
from broker.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from broker.protocol.records import Record, encode_batch
from tests.integration.broker_harness import connect, running_broker
from tests.integration.data_helpers import create_topic, fetch, fetch_request, produce, values_of

MARKER_VALUE = b"\x00" * 6  # control record value: version 0, coordinator epoch 0


def txn_batch(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    return encode_batch(
        [Record(i, i, None, v) for i, v in enumerate(values)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


async def init(conn: KafkaConnection, tid: str) -> tuple[int, int]:
    response = await conn.request(
        InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), 4
    )
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


async def add_partition(conn: KafkaConnection, tid: str, pid: int, epoch: int, topic: str) -> int:
    response = await conn.request(
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
        ),
        3,
    )
    return int(
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    )


async def end(conn: KafkaConnection, tid: str, pid: int, epoch: int, commit: bool) -> int:
    response = await conn.request(
        EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        ),
        3,
    )
    return int(response.error_code)


async def latest(conn: KafkaConnection, topic: str, isolation: int) -> int:
    response = await conn.request(
        ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation,
            topics=(
                ListOffsetsTopic(
                    name=topic, partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)
                ),
            ),
        ),
        5,
    )
    return int(response.topics[0].partitions[0].offset)


async def committed_fetch(conn: KafkaConnection, topic: str, offset: int) -> Any:

    request = fetch_request(topic, {0: offset})._replace(isolation_level=1)
    response = await conn.request(request, 12)
    return response.responses[0].partitions[0]


async def test_fetch_read_committed_returns_aborted_transactions_and_stops_at_the_lso(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "t")
        pid, epoch = await init(conn, "tx")
        assert await add_partition(conn, "tx", pid, epoch, "t") == ErrorCode.NONE
        assert (
            await produce(conn, "t", txn_batch([b"a", b"b"], pid, epoch, 0), transactional_id="tx")
        ).error_code == 0
        assert await end(conn, "tx", pid, epoch, False) == ErrorCode.NONE
        assert await add_partition(conn, "tx", pid, epoch, "t") == ErrorCode.NONE
        assert (
            await produce(conn, "t", txn_batch([b"c"], pid, epoch, 2), transactional_id="tx")
        ).error_code == 0
        open_data = await committed_fetch(conn, "t", 0)
        assert open_data.last_stable_offset == 3 and open_data.high_watermark == 4
        assert [(a.producer_id, a.first_offset) for a in open_data.aborted_transactions] == [
            (pid, 0)
        ]
        assert [v for _, v in values_of(open_data.records)] == [b"a", b"b", MARKER_VALUE]
        assert (await latest(conn, "t", 1), await latest(conn, "t", 0)) == (3, 4)
        uncommitted = await fetch(conn, "t", 0)
        assert uncommitted.aborted_transactions is None
        assert uncommitted.last_stable_offset == 3
        assert await end(conn, "tx", pid, epoch, True) == ErrorCode.NONE
        done = await committed_fetch(conn, "t", 3)
        assert [v for _, v in values_of(done.records)] == [b"c", MARKER_VALUE]
        assert done.aborted_transactions == ()
        assert await latest(conn, "t", 1) == 5


async def test_a_transactional_batch_outside_an_open_transaction_is_refused(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "t")
        pid, epoch = await init(conn, "tx")
        refused = await produce(conn, "t", txn_batch([b"x"], pid, epoch, 0), transactional_id="tx")
        assert refused.error_code == ErrorCode.INVALID_TXN_STATE
        stranger = await produce(
            conn, "t", txn_batch([b"x"], pid + 100, 0, 0), transactional_id="tx"
        )
        assert stranger.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await latest(conn, "t", 0) == 0


async def test_transactional_offsets_are_unstable_until_the_transaction_commits(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "t")
        pid, epoch = await init(conn, "tx")
        added = await conn.request(
            AddOffsetsToTxnRequest(
                transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
            ),
            3,
        )
        assert added.error_code == ErrorCode.NONE
        commit = await conn.request(
            TxnOffsetCommitRequest(
                transactional_id="tx",
                group_id="g",
                producer_id=pid,
                producer_epoch=epoch,
                topics=(
                    TxnOffsetCommitRequestTopic(
                        name="t",
                        partitions=(
                            TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7),
                        ),
                    ),
                ),
            ),
            3,
        )
        assert commit.topics[0].partitions[0].error_code == ErrorCode.NONE

        async def offset_fetch(require_stable: bool) -> tuple[int, int]:
            response = await conn.request(
                OffsetFetchRequest(
                    group_id="g",
                    topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0,)),),
                    require_stable=require_stable,
                ),
                7,
            )
            p = response.topics[0].partitions[0]
            return p.committed_offset, p.error_code

        assert await offset_fetch(True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert await offset_fetch(False) == (-1, ErrorCode.NONE)
        assert await end(conn, "tx", pid, epoch, True) == ErrorCode.NONE
        assert await offset_fetch(True) == (7, ErrorCode.NONE)


async def test_describe_and_list_transactions_and_producers(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "t")
        pid, epoch = await init(conn, "tx")
        await init(conn, "idle")
        await add_partition(conn, "tx", pid, epoch, "t")
        await produce(conn, "t", txn_batch([b"x"], pid, epoch, 0), transactional_id="tx")
        described = await conn.request(
            DescribeTransactionsRequest(transactional_ids=("tx", "missing")), 0
        )
        tx, missing = described.transaction_states
        assert (tx.transaction_state, tx.producer_id, tx.transaction_timeout_ms) == (
            "Ongoing",
            pid,
            60000,
        )
        assert [(t.topic, t.partitions) for t in tx.topics] == [("t", (0,))]
        assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        listed = await conn.request(ListTransactionsRequest(state_filters=("Ongoing", "Nope")), 1)
        assert [s.transactional_id for s in listed.transaction_states] == ["tx"]
        assert listed.unknown_state_filters == ("Nope",)
        everything = await conn.request(ListTransactionsRequest(), 0)
        assert {s.transactional_id for s in everything.transaction_states} == {"tx", "idle"}
        producers = await conn.request(
            DescribeProducersRequest(topics=(TopicRequest(name="t", partition_indexes=(0, 5)),)),
            0,
        )
        ok, unknown = producers.topics[0].partitions
        assert [(p.producer_id, p.current_txn_start_offset) for p in ok.active_producers] == [
            (pid, 0)
        ]
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_the_transaction_apis_are_advertised_and_find_coordinator_answers(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        versions = await conn.request(ApiVersionsRequest(), 2)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert {key: ranges[key] for key in (22, 24, 25, 26, 28, 61, 65, 66)} == {
            22: (0, 4),
            24: (0, 4),
            25: (0, 3),
            26: (0, 3),
            28: (0, 3),
            61: (0, 0),
            65: (0, 0),
            66: (0, 1),
        }
        found = await conn.request(FindCoordinatorRequest(key="tx", key_type=1), 1)
        assert (found.error_code, found.node_id) == (ErrorCode.NONE, server.node_id)
        assert found.port == server.bound_port()
