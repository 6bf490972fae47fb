"""The replica fetcher over the project's client against a real broker (its log,
its Fetch, OffsetForLeaderEpoch and ListOffsets handlers on a real socket), into an
in-memory follower log and into the broker's own PartitionLog."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import trio

from broker.config import BrokerConfig
from broker.log.follower_log import PartitionFollowerLog
from broker.log.log_manager import LogManager
from broker.protocol.error_codes import ErrorCode
from broker.replication.fetched_records import fetched_batches
from broker.replication.fetcher_partition_state import SendFetch, SendOffsetsForLeaderEpoch
from broker.replication.kafka_fetch_session import KafkaFetchSession
from broker.replication.leader_epoch_cache import EpochEndOffset
from broker.replication.leader_fetch_session import EpochEndOffsetAnswer, FetchLimits
from broker.replication.replica_fetcher import ReplicaFetcher, ReplicaFetcherSettings
from broker.replication.topic_partition import TopicPartition
from tests.integration.broker_harness import connect, running_broker
from tests.integration.data_helpers import (
    batch,
    create_topic,
    fetch,
    fetch_all,
    produce,
    values_of,
)
from tests.replication.fake_replicas import MemoryLog
from tests.waiting import wait_until

TP = TopicPartition("replicated", 0)
WAIT_S = 30.0


class CountingSession(KafkaFetchSession):
    """Counts the OffsetForLeaderEpoch requests, and keeps each answer."""

    answers: list[EpochEndOffsetAnswer]

    async def offsets_for_leader_epoch(
        self, partitions: Mapping[TopicPartition, SendOffsetsForLeaderEpoch]
    ) -> Mapping[TopicPartition, EpochEndOffsetAnswer]:
        answers = await super().offsets_for_leader_epoch(partitions)
        self.answers = [*getattr(self, "answers", []), *answers.values()]
        return answers


def follower_values(log: MemoryLog) -> list[tuple[int, bytes | None]]:
    return [v for stored in log.batches for v in values_of(stored.data)]


async def test_a_follower_copies_a_brokers_log_over_fetch_with_its_replica_id(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as client:
        assert (await create_topic(client, TP.topic)).error_code == ErrorCode.NONE
        for i in range(3):
            answer = await produce(client, TP.topic, batch([b"a%d" % i, b"b%d" % i]))
            assert answer.error_code == ErrorCode.NONE
        follower = MemoryLog()
        async with (
            await connect(server, client_id="replica-fetcher-2") as replica_connection,
            trio.open_nursery() as nursery,
        ):
            session = CountingSession(replica_connection, replica_id=2)
            settings = ReplicaFetcherSettings(replica_fetch_backoff_ms=100)
            fetcher = ReplicaFetcher(1, session, settings)
            await nursery.start(fetcher.run)
            fetcher.add_partition(TP, follower, leader_epoch=0)
            expected = await fetch_all(client, TP.topic)
            await wait_until(lambda: follower_values(follower) == expected, WAIT_S)
            assert follower.log_end_offset == 6 and follower.high_watermark == 6

            # Following again (a new LeaderAndIsr) asks OffsetForLeaderEpoch first: the
            # logs agree, nothing is cut, and new records keep coming.
            fetcher.add_partition(TP, follower, leader_epoch=0)
            await wait_until(lambda: getattr(session, "answers", None), WAIT_S)
            assert session.answers == [EpochEndOffsetAnswer(ErrorCode.NONE, EpochEndOffset(0, 6))]
            await produce(client, TP.topic, batch([b"c"]))
            expected = await fetch_all(client, TP.topic)
            await wait_until(lambda: follower_values(follower) == expected, WAIT_S)
            assert follower.log_end_offset == 7
            assert not fetcher.fenced
            nursery.cancel_scope.cancel()


async def test_a_follower_appends_to_the_brokers_own_log_with_the_leaders_offsets(
    tmp_path: Path,
) -> None:
    follower_config = BrokerConfig({"log.dirs": str(tmp_path / "follower")})
    follower_logs = LogManager(follower_config)
    await follower_logs.open()
    try:
        await follower_logs.create_topic(TP.topic, 1)
        partition_log = follower_logs.partition(TP.topic, TP.partition)
        assert partition_log is not None
        follower = PartitionFollowerLog(partition_log)
        async with running_broker(tmp_path / "leader") as server, await connect(server) as client:
            assert (await create_topic(client, TP.topic)).error_code == ErrorCode.NONE
            for i in range(3):
                await produce(client, TP.topic, batch([b"x%d" % i] * (i + 1)))
            async with (
                await connect(server, client_id="replica-fetcher-2") as replica_connection,
                trio.open_nursery() as nursery,
            ):
                fetcher = ReplicaFetcher(1, KafkaFetchSession(replica_connection, replica_id=2))
                await nursery.start(fetcher.run)
                fetcher.add_partition(TP, follower, leader_epoch=0)
                await wait_until(lambda: partition_log.log_end_offset == 6, WAIT_S)
                nursery.cancel_scope.cancel()
            leader_records = (await fetch(client, TP.topic, 0)).records
        copied = (await partition_log.read(0, 1 << 20)).records
        assert bytes(copied) == bytes(leader_records)  # the same batches, byte for byte
        assert follower.high_watermark == 6
    finally:
        with trio.CancelScope(shield=True):
            await follower_logs.close()


async def test_a_large_fetch_answer_reaches_the_follower_as_a_view_of_the_received_frame(
    tmp_path: Path,
) -> None:
    """The follower's bytes are never copied between the socket and its log: the records
    are a view of the response frame's own buffer (received into over plain TCP), and
    the whole batches handed to the log are a view of the same buffer."""
    values = [bytes([i]) * 50_000 for i in range(6)]  # 300 kB: the frame gets its own buffer
    async with running_broker(tmp_path) as server, await connect(server) as client:
        assert (await create_topic(client, TP.topic)).error_code == ErrorCode.NONE
        assert (await produce(client, TP.topic, batch(values))).error_code == ErrorCode.NONE
        async with await connect(server, client_id="replica-fetcher-2") as replica_connection:
            session = KafkaFetchSession(replica_connection, replica_id=2)
            answers = await session.fetch(
                {
                    TP: SendFetch(
                        fetch_offset=0,
                        current_leader_epoch=0,
                        last_fetched_epoch=-1,
                        log_start_offset=0,
                    )
                },
                FetchLimits(max_wait_ms=0),
            )
    records = answers[TP].records
    assert isinstance(records, memoryview) and isinstance(records.obj, bytearray)
    whole = fetched_batches(records)
    assert isinstance(whole.records, memoryview) and whole.records.obj is records.obj
    assert [v for _, v in values_of(bytes(whole.records))] == values
    assert whole.base_offset == 0 and whole.end_offset == len(values)
