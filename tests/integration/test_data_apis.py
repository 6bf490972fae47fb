"""Produce, Fetch, ListOffsets, InitProducerId and friends against a real broker and log.

Every test talks to the broker over real sockets with our own client; records
are built by `records.encode_batch`, the way a producer builds them. Tests of
bad input fetch the whole log back afterwards: nothing refused may be in it.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
import trio

from broker.client.connection import ConnectionClosed
from broker.protocol import records as rec
from broker.protocol.compression import CompressionType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ApiVersionsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
)
from broker.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from broker.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from tests.integration.broker_harness import connect, running_broker
from tests.integration.data_helpers import (
    FETCH_VERSION,
    batch,
    create_topic,
    fetch,
    fetch_all,
    fetch_request,
    list_offset,
    produce,
    produce_request,
    values_of,
)
from tests.waiting import wait_until


async def test_every_codec_round_trips_through_produce_and_fetch(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "codecs")
        expected: list[bytes] = []
        for codec in CompressionType:
            values = [f"{codec.name}-{i}".encode() * 20 for i in range(5)]
            response = await produce(conn, "codecs", batch(values, compression=codec))
            assert response.error_code == ErrorCode.NONE, response.error_message
            assert response.base_offset == len(expected)
            expected += values
        assert [v for _, v in await fetch_all(conn, "codecs")] == expected


async def test_produce_to_several_partitions_answers_each(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "multi", partitions=3)
        request = produce_request(
            "multi", {0: batch([b"a"]), 2: batch([b"b", b"c"]), 7: batch([b"x"])}
        )
        response = await conn.request(request, 9)
        by_index = {p.index: p for p in response.responses[0].partition_responses}
        assert by_index[0].error_code == by_index[2].error_code == ErrorCode.NONE
        assert by_index[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert [v for _, v in await fetch_all(conn, "multi", 2)] == [b"b", b"c"]
        assert await fetch_all(conn, "multi", 1) == []


async def test_acks_zero_success_sends_nothing_and_the_next_request_is_answered(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "quiet")
        await conn.send(produce_request("quiet", {0: batch([b"fire-and-forget"])}, acks=0), 9)
        conn._pending.clear()  # no response will come for acks=0
        response = await conn.request(ApiVersionsRequest(), 0)
        assert response.error_code == ErrorCode.NONE
        assert [v for _, v in await fetch_all(conn, "quiet")] == [b"fire-and-forget"]


async def test_acks_zero_failure_closes_the_connection(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await conn.send(produce_request("missing", {0: batch([b"x"])}, acks=0), 9)
        with trio.fail_after(5), pytest.raises((ConnectionClosed, trio.BrokenResourceError)):
            await conn.receive_frame()


async def test_invalid_acks_is_refused_per_partition(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "acks")
        response = await produce(conn, "acks", batch([b"x"]), acks=2)
        assert response.error_code == ErrorCode.INVALID_REQUIRED_ACKS
        assert await fetch_all(conn, "acks") == []


async def test_idempotent_duplicate_is_acknowledged_once_with_the_same_offsets(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "idem")
        init = await conn.request(InitProducerIdRequest(transactional_id=None), 4)
        assert init.error_code == ErrorCode.NONE and init.producer_id >= 0
        pid, epoch = init.producer_id, init.producer_epoch
        first = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        second = batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
        r1 = await produce(conn, "idem", first)
        r2 = await produce(conn, "idem", second)
        again = await produce(conn, "idem", first)
        assert again.error_code == ErrorCode.NONE
        assert again.base_offset == r1.base_offset == 0
        assert r2.base_offset == 2
        gap = batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=7)
        assert (
            await produce(conn, "idem", gap)
        ).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert [v for _, v in await fetch_all(conn, "idem")] == [b"a", b"b", b"c"]


async def test_init_producer_id_allocates_fresh_ids_and_epochs_per_transactional_id(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        a = await conn.request(InitProducerIdRequest(transactional_id=None), 0)
        b = await conn.request(
            InitProducerIdRequest(
                transactional_id=None, producer_id=a.producer_id, producer_epoch=0
            ),
            4,
        )
        assert (a.producer_epoch, b.producer_epoch) == (0, 0)
        assert b.producer_id != a.producer_id
        txn = await conn.request(
            InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4
        )
        again = await conn.request(
            InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4
        )
        assert (txn.error_code, txn.producer_epoch) == (ErrorCode.NONE, 0)
        assert (again.producer_id, again.producer_epoch) == (txn.producer_id, 1)
        assert txn.producer_id not in (a.producer_id, b.producer_id)
        half = await conn.request(
            InitProducerIdRequest(transactional_id=None, producer_id=5, producer_epoch=-1), 4
        )
        assert half.error_code == ErrorCode.INVALID_REQUEST


async def test_long_poll_is_woken_by_a_produce(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        consumer, producer = await connect(server), await connect(server)
        await create_topic(producer, "wake")
        started = trio.current_time()
        async with trio.open_nursery() as nursery:

            async def produce_later() -> None:
                await trio.sleep(0.3)
                await produce(producer, "wake", batch([b"hello"]))

            nursery.start_soon(produce_later)
            data = await fetch(consumer, "wake", 0, max_wait_ms=10_000, min_bytes=1)
        waited = trio.current_time() - started
        assert [v for _, v in values_of(data.records)] == [b"hello"]
        assert 0.25 <= waited < 5


async def test_long_poll_returns_empty_at_max_wait(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "idle")
        started = trio.current_time()
        data = await fetch(conn, "idle", 0, max_wait_ms=400, min_bytes=1)
        waited = trio.current_time() - started
        assert data.error_code == ErrorCode.NONE and values_of(data.records) == []
        assert 0.35 <= waited < 3


async def test_min_bytes_waits_until_enough_data_arrived(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        consumer, producer = await connect(server), await connect(server)
        await create_topic(producer, "minb")
        await produce(producer, "minb", batch([b"x"]))
        async with trio.open_nursery() as nursery:

            async def produce_big() -> None:
                await trio.sleep(0.2)
                await produce(producer, "minb", batch([b"y" * 5000]))

            nursery.start_soon(produce_big)
            data = await fetch(consumer, "minb", 0, max_wait_ms=10_000, min_bytes=4000)
        assert [v for _, v in values_of(data.records)] == [b"x", b"y" * 5000]


async def test_max_bytes_still_returns_the_first_batch_kip74(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "budget", partitions=2)
        for partition in (0, 1):
            for i in range(3):
                await produce(conn, "budget", batch([b"%d" % i * 1000]), partition=partition)
        response = await conn.request(
            fetch_request("budget", {0: 0, 1: 0}, max_bytes=10, partition_max_bytes=10),
            FETCH_VERSION,
        )
        first, second = response.responses[0].partitions
        assert len(values_of(first.records)) == 1  # bigger than both limits, yet returned
        assert values_of(second.records) == []  # the budget is spent
        assert second.high_watermark == 3


async def test_fetch_errors_per_partition(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "errs")
        await produce(conn, "errs", batch([b"a"]))
        assert (await fetch(conn, "errs", 5)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert (await fetch(conn, "errs", -1)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert (await fetch(conn, "nope", 0)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        at_end = await fetch(conn, "errs", 1)
        assert at_end.error_code == ErrorCode.NONE and at_end.high_watermark == 1


async def test_incremental_fetch_session_is_not_found_and_full_fetch_is_sessionless(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "sess")
        full = await conn.request(fetch_request("sess", {0: 0}, session_epoch=0), FETCH_VERSION)
        assert full.error_code == ErrorCode.NONE and full.session_id == 0
        incremental = await conn.request(
            fetch_request("sess", {0: 0}, session_id=12, session_epoch=1), FETCH_VERSION
        )
        assert incremental.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_fetch_by_topic_id_from_v13(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        created = await create_topic(conn, "ids")
        await produce(conn, "ids", batch([b"by-id"]))
        request = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            session_epoch=-1,
            topics=(
                FetchTopic(
                    topic_id=created.topic_id,
                    partitions=(FetchPartition(partition=0, partition_max_bytes=1 << 20),),
                ),
                FetchTopic(
                    topic_id=created.topic_id.__class__(int=7),
                    partitions=(FetchPartition(partition=0),),
                ),
            ),
        )
        response = await conn.request(request, 16)
        known, unknown = response.responses
        assert [v for _, v in values_of(known.partitions[0].records)] == [b"by-id"]
        assert unknown.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_list_offsets_earliest_latest_timestamp_and_max(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "times")
        now = int(time.time() * 1000)
        await produce(conn, "times", batch([b"a", b"b"], base_timestamp=now - 10_000))
        await produce(conn, "times", batch([b"c"], base_timestamp=now + 5_000))
        await produce(conn, "times", batch([b"d"], base_timestamp=now - 1_000))
        assert (await list_offset(conn, "times", -2)).offset == 0
        latest = await list_offset(conn, "times", -1)
        assert (latest.offset, latest.timestamp, latest.leader_epoch) == (4, -1, 0)
        found = await list_offset(conn, "times", now)
        assert (found.offset, found.timestamp) == (2, now + 5_000)
        assert (await list_offset(conn, "times", now + 60_000)).offset == -1
        biggest = await list_offset(conn, "times", -3)
        assert (biggest.offset, biggest.timestamp) == (2, now + 5_000)
        missing = await list_offset(conn, "nope", -1)
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_delete_records_moves_the_log_start(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "trim")
        for i in range(4):
            await produce(conn, "trim", batch([b"%d" % i]))
        response = await conn.request(
            DeleteRecordsRequest(
                topics=(
                    DeleteRecordsTopic(
                        name="trim",
                        partitions=(DeleteRecordsPartition(partition_index=0, offset=2),),
                    ),
                ),
                timeout_ms=1000,
            ),
            2,
        )
        assert response.topics[0].partitions[0].low_watermark == 2
        assert (await fetch(conn, "trim", 1)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert (await list_offset(conn, "trim", -2)).offset == 2
        assert [v for _, v in await fetch_all(conn, "trim")] == [b"2", b"3"]


async def test_offset_for_leader_epoch_ends_the_current_epoch_at_the_log_end(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "epochs")
        await produce(conn, "epochs", batch([b"a", b"b"]))
        response = await conn.request(
            OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=(
                    OffsetForLeaderTopic(
                        topic="epochs",
                        partitions=(
                            OffsetForLeaderPartition(
                                partition=0, current_leader_epoch=0, leader_epoch=0
                            ),
                            OffsetForLeaderPartition(
                                partition=0, current_leader_epoch=-1, leader_epoch=3
                            ),
                            OffsetForLeaderPartition(
                                partition=5, current_leader_epoch=-1, leader_epoch=0
                            ),
                        ),
                    ),
                ),
            ),
            4,
        )
        current, future, unknown = response.topics[0].partitions
        assert (current.leader_epoch, current.end_offset) == (0, 2)
        assert (future.leader_epoch, future.end_offset) == (-1, -1)
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def corrupt_crc(data: bytes) -> bytes:
    raw = bytearray(data)
    raw[-1] ^= 0xFF
    return bytes(raw)


def legacy_message_set() -> bytes:
    """A magic-1 message set (offset, size, crc, magic 1, attributes, timestamp, key, value)."""
    body = struct.pack(">bbqi", 1, 0, 0, -1) + struct.pack(">i", 1) + b"v"
    message = struct.pack(">I", 0) + body
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (corrupt_crc(batch([b"x" * 50])), ErrorCode.CORRUPT_MESSAGE),
        (legacy_message_set(), ErrorCode.INVALID_RECORD),
        (batch([b"x"])[:40], ErrorCode.CORRUPT_MESSAGE),
        (batch([b"x"]) + batch([b"y"]), ErrorCode.INVALID_RECORD),
        (None, ErrorCode.INVALID_RECORD),
        (batch([b"x" * 3000]), ErrorCode.MESSAGE_TOO_LARGE),
    ],
    ids=["bad-crc", "magic-1", "truncated", "two-batches", "null", "oversize"],
)
async def test_bad_batches_get_kafka_error_codes_and_never_reach_the_log(
    tmp_path: Path, records: bytes | None, expected: ErrorCode
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "guarded", configs={"max.message.bytes": "2000"})
        await produce(conn, "guarded", batch([b"before"]))
        response = await produce(conn, "guarded", records)
        assert response.error_code == expected
        assert response.base_offset == -1
        await produce(conn, "guarded", batch([b"after"]))
        assert [v for _, v in await fetch_all(conn, "guarded")] == [b"before", b"after"]


async def test_produce_to_unknown_or_deleted_topic_is_unknown(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        assert (
            await produce(conn, "never", batch([b"x"]))
        ).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await create_topic(conn, "doomed")
        await produce(conn, "doomed", batch([b"x"]))
        deleted = await conn.request(
            DeleteTopicsRequest(topic_names=("doomed",), timeout_ms=1000), 5
        )
        assert deleted.responses[0].error_code == ErrorCode.NONE
        response = await produce(conn, "doomed", batch([b"y"]))
        assert response.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_log_append_time_topics_stamp_the_broker_clock(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "stamped", configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        response = await produce(conn, "stamped", batch([b"x"], base_timestamp=1))
        assert before <= response.log_append_time_ms <= int(time.time() * 1000) + 1


async def test_create_time_outside_the_allowed_range_is_invalid_timestamp(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "strict", configs={"message.timestamp.before.max.ms": "60000"})
        old = await produce(conn, "strict", batch([b"x"], base_timestamp=1000))
        assert old.error_code == ErrorCode.INVALID_TIMESTAMP
        assert old.record_errors[0].batch_index == 0
        assert (await produce(conn, "strict", batch([b"y"]))).error_code == ErrorCode.NONE
        assert [v for _, v in await fetch_all(conn, "strict")] == [b"y"]


async def test_a_record_without_a_key_is_refused_by_a_compacted_topic(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "table", configs={"cleanup.policy": "compact"})
        records = [rec.Record(0, 0, b"k", b"v"), rec.Record(1, 1, None, b"keyless")]
        refused = await produce(conn, "table", rec.encode_batch(records))
        assert refused.error_code == ErrorCode.INVALID_RECORD
        assert refused.record_errors[0].batch_index == 1
        assert refused.error_message == (
            "Compacted topic cannot accept message without key in topic partition table-0."
        )
        assert (await produce(conn, "table", batch([b"kept"]))).error_code == ErrorCode.NONE
        assert [v for _, v in await fetch_all(conn, "table")] == [b"kept"]


async def test_metadata_auto_creates_and_reports_the_leader(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path, {"num.partitions": "3"}) as server,
        await connect(server) as conn,
    ):
        response = await conn.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(name="auto"), MetadataRequestTopic(name="bad name!")),
                allow_auto_topic_creation=True,
            ),
            12,
        )
        auto, bad = response.topics
        assert auto.error_code == ErrorCode.NONE and len(auto.partitions) == 3
        assert {p.leader_id for p in auto.partitions} == {server.node_id}
        assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        not_created = await conn.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(name="manual"),), allow_auto_topic_creation=False
            ),
            12,
        )
        assert not_created.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        by_id = await conn.request(
            MetadataRequest(topics=(MetadataRequestTopic(topic_id=auto.topic_id, name=None),)), 12
        )
        assert by_id.topics[0].name == "auto"


async def test_a_restart_keeps_topics_and_offsets(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "durable", partitions=2)
        await produce(conn, "durable", batch([b"a", b"b"]), partition=1)
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        assert [v for _, v in await fetch_all(conn, "durable", 1)] == [b"a", b"b"]
        response = await produce(conn, "durable", batch([b"c"]), partition=1)
        assert response.base_offset == 2


async def test_a_graceful_shutdown_answers_a_long_poll_fetch_at_once(tmp_path: Path) -> None:
    """A Fetch may ask to wait for minutes; shutting down answers it with what there is
    instead of holding the broker for `broker.shutdown.timeout.ms`."""
    from broker.server import KafkaServer
    from tests.integration.broker_harness import base_config

    server = KafkaServer(base_config(tmp_path, {"broker.shutdown.timeout.ms": "120000"}))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        async with await connect(server) as conn:
            await create_topic(conn, "quiet")
            answered: list[FetchResponse] = []

            async def long_poll() -> None:
                request = fetch_request("quiet", {0: 0}, max_wait_ms=600_000, min_bytes=1)
                answered.append(await conn.request(request, FETCH_VERSION))

            nursery.start_soon(long_poll)
            await wait_until(lambda: server.apis.deferred_waiting == 1, 30)
            server.shutdown()
            with trio.fail_after(60):  # far below the fetch's 600 s and the 120 s timeout
                await server.stopped.wait()
        assert len(answered) == 1
        partition = answered[0].responses[0].partitions[0]
        assert (partition.error_code, partition.high_watermark) == (ErrorCode.NONE, 0)
        assert not partition.records
