"""Request-to-response rules of the data handlers, against an in-memory log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from broker.config import BrokerConfig
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore
from broker.errors import KafkaError
from broker.handlers.api_handler import CloseConnection, Deferred, NoResponse
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.common import check_leader_epoch, topic_name_error
from broker.handlers.fetch import FetchHandler, wait_any
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.log_topics import LogTopicSource
from broker.handlers.produce import ProduceHandler
from broker.handlers.replica_tracking import NoReplication
from broker.protocol import records as rec
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    ProduceRequest,
    ProduceResponse,
)
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.validator import LogValidator
from broker.topology import SingleProcessTopology
from tests.handlers.fake_log import FakeLog, FakeTopic


class FakeRequest:
    """Just what the handlers read from a request."""

    def __init__(self, body: Any, api_version: int, bulk_on_loop: bool = False) -> None:
        self.body = body
        self.api_version = api_version
        self.bulk_on_loop = bulk_on_loop

    def reserve_response_memory(self, wanted: int) -> int:
        return wanted

    def keep_response_memory(self, used: int) -> None:
        pass


def one_batch(size: int) -> bytes:
    return rec.encode_batch(
        [rec.Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v" * size)]
    )


def produce_body(topic: str, records: bytes | None, acks: int) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=0, records=records),)
            ),
        ),
    )


async def test_acks_other_than_minus_one_zero_one_are_invalid() -> None:
    log = FakeLog(FakeTopic("t", 1))
    handler = ProduceHandler(log)
    response = await handler.handle(FakeRequest(produce_body("t", one_batch(10), acks=5), 9))  # type: ignore[arg-type]
    assert isinstance(response, ProduceResponse)
    assert (
        response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    )
    assert log.partition("t", 0).batches == []  # type: ignore[union-attr]


async def test_acks_zero_answers_nothing_on_success_and_closes_on_failure() -> None:
    handler = ProduceHandler(FakeLog(FakeTopic("t", 1)))
    ok = await handler.handle(FakeRequest(produce_body("t", one_batch(10), acks=0), 9))  # type: ignore[arg-type]
    assert isinstance(ok, NoResponse)
    failed = await handler.handle(FakeRequest(produce_body("gone", one_batch(10), acks=0), 9))  # type: ignore[arg-type]
    assert isinstance(failed, CloseConnection) and "UNKNOWN_TOPIC_OR_PARTITION" in failed.reason
    assert handler.error_response(FakeRequest(produce_body("t", None, acks=0), 9), 2) is None  # type: ignore[arg-type]


async def test_min_insync_replicas_above_one_cannot_be_met_with_acks_all() -> None:
    log = FakeLog(FakeTopic("t", 1, {"min.insync.replicas": "2"}))
    handler = ProduceHandler(log)
    all_acks = await handler.handle(FakeRequest(produce_body("t", one_batch(1), acks=-1), 9))  # type: ignore[arg-type]
    assert isinstance(all_acks, ProduceResponse)
    assert all_acks.responses[0].partition_responses[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    leader_ack = await handler.handle(FakeRequest(produce_body("t", one_batch(1), acks=1), 9))  # type: ignore[arg-type]
    assert isinstance(leader_ack, ProduceResponse)
    assert leader_ack.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def test_timestamps_are_checked_per_record_only_when_limited() -> None:
    records = [
        rec.Record(offset_delta=i, timestamp_delta=d, key=None, value=b"")
        for i, d in enumerate((0, -5000))
    ]
    data = rec.encode_batch(records, base_timestamp=100_000)
    header = rec.read_batch_header(data)
    unlimited = LogValidator()
    assert not unlimited.needs_records
    unlimited.check_records(unlimited.check_batch(data, header), now_ms=100_000)
    limited = LogValidator(timestamp_before_max_ms=1000, timestamp_after_max_ms=1000)
    with pytest.raises(InvalidRecordsError) as late:
        limited.check_records(limited.check_batch(data, header), now_ms=100_000)
    assert late.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert late.value.record_index == 1  # the second record, despite the batch's base


def fetch_body(
    offsets: dict[int, int], max_bytes: int, partition_max_bytes: int, **kwargs: Any
) -> FetchRequest:
    kwargs.setdefault("session_epoch", -1)
    return FetchRequest(
        max_bytes=max_bytes,
        topics=(
            FetchTopic(
                topic="t",
                partitions=tuple(
                    FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
        **kwargs,
    )


async def test_fetch_budget_gives_only_the_first_non_empty_partition_an_oversized_batch() -> None:
    topic = FakeTopic("t", 3)
    for partition in topic.partitions[1:]:
        for _ in range(2):
            await partition.append(one_batch(500), rec.read_batch_header(one_batch(500)))
    handler = FetchHandler(FakeLog(topic))
    outcome = await handler.read_once(
        fetch_body({0: 0, 1: 0, 2: 0}, max_bytes=100, partition_max_bytes=100), 12
    )
    empty, first, second = outcome.response.responses[0].partitions
    assert first.records is not None
    assert empty.records == b"" and len(first.records) > 100 and second.records == b""
    reads = [p.reads[0] for p in topic.partitions]
    assert reads[0] == (0, 100, True)  # still entitled to one batch: nothing read yet
    assert reads[1] == (0, 100, True)
    assert reads[2] == (0, 0, False)  # budget spent, and no more oversize batches
    assert outcome.bytes_read == len(first.records)


class ThrottlingLeader(NoReplication):
    """The leader's side of the reassignment throttle, over the rate for partition 0."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def throttle_replica_fetch(self, topic: str, partition: int, replica_id: int) -> bool:
        return partition == 0

    def replica_bytes_sent(self, topic: str, partition: int, size: int) -> None:
        self.sent.append((partition, size))


async def test_a_follower_fetch_of_a_throttled_partition_is_answered_without_its_records() -> None:
    topic = FakeTopic("t", 2)
    for partition in topic.partitions:
        await partition.append(one_batch(500), rec.read_batch_header(one_batch(500)))
    leader = ThrottlingLeader()
    handler = FetchHandler(FakeLog(topic), replication=leader)
    body = fetch_body({0: 0, 1: 0}, max_bytes=1 << 20, partition_max_bytes=1 << 20, replica_id=2)
    outcome = await handler.read_once(body, 12)
    held, sent = outcome.response.responses[0].partitions
    assert (held.error_code, held.records) == (ErrorCode.NONE, b"")  # left out, not an error
    assert sent.records is not None and len(sent.records) > 0
    assert leader.sent == [(0, 0), (1, len(sent.records))]
    # A consumer's fetch is never throttled by it.
    consumer = await handler.read_once(fetch_body({0: 0}, 1 << 20, 1 << 20), 12)
    assert consumer.response.responses[0].partitions[0].records not in (None, b"")


class TrackingLeader(NoReplication):
    """The leader's follower tracking, recording each fetch it counted."""

    def __init__(self) -> None:
        self.fetches: list[tuple[int, int]] = []

    def on_follower_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int
    ) -> ErrorCode:
        self.fetches.append((replica_id, fetch_offset))
        return ErrorCode.NONE


async def test_a_follower_fetch_at_an_older_leader_epoch_is_fenced_before_it_is_tracked() -> None:
    # The controller took a leaving follower out of the ISR at the next epoch: a fetch it
    # sent before it knew must not count (the leader would take it back into the ISR).
    topic = FakeTopic("t", 1)
    topic.partitions[0].leader_epoch = 3
    leader = TrackingLeader()
    handler = FetchHandler(FakeLog(topic), replication=leader)
    old = FetchPartition(partition=0, fetch_offset=0, current_leader_epoch=2)
    body = fetch_body({0: 0}, 1 << 20, 1 << 20, replica_id=2)
    body = body._replace(topics=(FetchTopic(topic="t", partitions=(old,)),))
    outcome = await handler.read_once(body, 12)
    assert outcome.response.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert leader.fetches == []
    current = await handler.read_once(fetch_body({0: 0}, 1 << 20, 1 << 20, replica_id=2), 12)
    assert current.response.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert leader.fetches == [(2, 0)]


async def test_fetch_without_enough_data_defers_and_wakes_on_append() -> None:
    topic = FakeTopic("t", 1)
    handler = FetchHandler(FakeLog(topic))
    body = fetch_body(
        {0: 0}, max_bytes=1 << 20, partition_max_bytes=1 << 20, max_wait_ms=10_000, min_bytes=1
    )
    outcome = await handler.handle(FakeRequest(body, 12))  # type: ignore[arg-type]
    assert isinstance(outcome, Deferred)
    async with trio.open_nursery() as nursery:

        async def append_soon() -> None:
            await trio.sleep(0.05)
            await topic.partitions[0].append(one_batch(10), rec.read_batch_header(one_batch(10)))

        nursery.start_soon(append_soon)
        with trio.fail_after(5):
            response = await outcome.wait()
    assert response.responses[0].partitions[0].records != b""


async def test_a_long_poll_wakes_on_any_of_its_events_and_waits_once_on_a_repeated_one() -> None:
    first, second = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:

        async def set_soon() -> None:
            await trio.sleep(0.05)
            second.set()

        nursery.start_soon(set_soon)
        with trio.fail_after(5):
            await wait_any([first, second, first])
    assert second.is_set() and not first.is_set()
    with trio.fail_after(5):
        await wait_any([second, second])  # the same partition's event, set: at once
    with trio.move_on_after(0.05) as waited:
        await wait_any([first, first])
    assert waited.cancelled_caught  # none of them set: still waiting


def wake_without_records(partition: Any) -> None:
    """What the log does when its high watermark rises: its readers wake, no new records."""
    event = partition.data_appended()
    partition._event = trio.Event()
    event.set()


@pytest.mark.parametrize("replica_id", [2, -1])
async def test_a_followers_long_poll_rereads_only_once_its_log_end_moves(replica_id: int) -> None:
    """Kafka's DelayedFetch measures a follower's bytes against the log end: a high
    watermark rise (every acks=all batch makes one) does not read again for it, as it
    does for a consumer, who reads below the high watermark."""
    topic = FakeTopic("t", 1)
    partition = topic.partitions[0]
    await partition.append(one_batch(10), rec.read_batch_header(one_batch(10)))
    handler = FetchHandler(FakeLog(topic))
    end = partition.log_end_offset
    wanted = FetchPartition(partition=0, fetch_offset=end, partition_max_bytes=1 << 20)
    body = FetchRequest(
        max_bytes=1 << 20,
        max_wait_ms=10_000,
        min_bytes=1,
        replica_id=replica_id,
        session_epoch=-1,
        topics=(FetchTopic(topic="t", partitions=(wanted,)),),
    )
    outcome = await handler.handle(FakeRequest(body, 12))  # type: ignore[arg-type]
    assert isinstance(outcome, Deferred) and len(partition.reads) == 1
    async with trio.open_nursery() as nursery:

        async def wake_then_append() -> None:
            await trio.sleep(0.05)
            wake_without_records(partition)
            await trio.sleep(0.05)
            assert len(partition.reads) == (1 if replica_id >= 0 else 2)
            await partition.append(one_batch(10), rec.read_batch_header(one_batch(10)))

        nursery.start_soon(wake_then_append)
        with trio.fail_after(5):
            response = await outcome.wait()
    assert response.responses[0].partitions[0].records not in (None, b"")
    assert partition.reads[-1][0] == end


async def test_incremental_fetch_without_sessions_is_session_id_not_found() -> None:
    handler = FetchHandler(FakeLog(FakeTopic("t", 1)))
    body = fetch_body({0: 0}, max_bytes=100, partition_max_bytes=100, session_id=3, session_epoch=2)
    response = await handler.handle(FakeRequest(body, 12))  # type: ignore[arg-type]
    assert isinstance(response, FetchResponse)
    assert response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and response.responses == ()


async def test_init_producer_id_gives_a_new_id_even_when_one_is_sent() -> None:
    log = FakeLog()
    handler = InitProducerIdHandler(log)
    first = await handler.handle(FakeRequest(InitProducerIdRequest(transactional_id=None), 4))  # type: ignore[arg-type]
    again = await handler.handle(
        FakeRequest(
            InitProducerIdRequest(
                transactional_id=None, producer_id=first.producer_id, producer_epoch=0
            ),
            4,
        )  # type: ignore[arg-type]
    )
    assert (first.producer_id, again.producer_id, again.producer_epoch) == (1, 2, 0)
    empty = await handler.handle(FakeRequest(InitProducerIdRequest(transactional_id=""), 4))  # type: ignore[arg-type]
    assert empty.error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("name", "legal"),
    [
        ("ok.topic_1-x", True),
        ("", False),
        (".", False),
        ("..", False),
        ("a" * 249, True),
        ("a" * 250, False),
        ("sp ace", False),
    ],
)
def test_topic_names_follow_kafka_rules(name: str, legal: bool) -> None:
    assert (topic_name_error(name) is None) == legal


@pytest.mark.parametrize(
    ("requested", "code"), [(-1, None), (0, None), (1, ErrorCode.UNKNOWN_LEADER_EPOCH)]
)
def test_leader_epoch_check(requested: int, code: ErrorCode | None) -> None:
    if code is None:
        check_leader_epoch(requested, 0)
    else:
        with pytest.raises(KafkaError) as info:
            check_leader_epoch(requested, 0)
        assert info.value.error_code == code
    with pytest.raises(KafkaError) as fenced:
        check_leader_epoch(1, 2)
    assert fenced.value.error_code == ErrorCode.FENCED_LEADER_EPOCH


async def test_metadata_auto_creation_respects_the_request_and_internal_names() -> None:
    log = FakeLog()
    source = LogTopicSource(log, SingleProcessTopology(7, lambda _listener: ("h", 1)))
    created, internal = await source.describe_topics(
        ["new", "__consumer_offsets"], allow_auto_create=True
    )
    assert created.error_code == ErrorCode.NONE and created.partitions[0].leader_id == 7
    assert internal.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (refused,) = await source.describe_topics(["other"], allow_auto_create=False)
    assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    log.auto_create_topics = False
    (disabled,) = await source.describe_topics(["third"], allow_auto_create=True)
    assert disabled.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class FakeServer:
    def __init__(self) -> None:
        self.config = BrokerConfig(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "num.io.threads": "4", "log.dirs": "/x"}
        )
        self.node_id = 1
        self.io_threads = 4
        self.network_threads = 3
        self.quota_configs: list[BrokerConfig] = []

    async def resize_network_threads(self, new_count: int) -> None:
        self.network_threads = new_count

    def resize_io_threads(self, new_count: int) -> None:
        self.io_threads = new_count

    def update_connection_quotas(self, config: BrokerConfig) -> None:
        self.quota_configs.append(config)


async def test_connection_limits_change_at_runtime_and_fall_back_when_deleted(
    tmp_path: Path,
) -> None:
    server = FakeServer()
    configs = BrokerConfigs(server, DynamicBrokerConfigStore(tmp_path))
    await configs.alter("", {"max.connections": "100", "max.connections.per.ip": "7"})
    assert [
        (c.get_int("max.connections"), c.get_int("max.connections.per.ip"))
        for c in server.quota_configs
    ] == [(100, 7)]
    await configs.alter("1", {"max.connections": "50"})
    assert server.quota_configs[-1].get_int("max.connections") == 50
    await configs.alter("1", {}, ["max.connections"])
    assert server.quota_configs[-1].get_int("max.connections") == 100  # the cluster default
    await configs.alter("", {"num.io.threads": "5"})
    assert len(server.quota_configs) == 3, "a thread count change leaves the limits alone"
    await configs.alter("", {"max.connections": "10"}, validate_only=True)
    assert len(server.quota_configs) == 3 and configs.value("max.connections") == "100"


async def test_a_connection_limit_change_that_does_not_validate_changes_nothing(
    tmp_path: Path,
) -> None:
    server = FakeServer()
    configs = BrokerConfigs(server, DynamicBrokerConfigStore(tmp_path))
    with pytest.raises(KafkaError) as raised:
        await configs.alter("", {"max.connections.per.ip": "0"})
    assert raised.value.error_code == ErrorCode.INVALID_REQUEST
    assert "overrides" in str(raised.value)
    assert server.quota_configs == [] and configs.value("max.connections.per.ip") == str(2**31 - 1)
    with pytest.raises(KafkaError):
        await configs.alter("", {"max.connections.per.ip.overrides": "host:notanumber"})
    assert server.quota_configs == []


async def test_broker_config_layers_and_resize_validation(tmp_path: Path) -> None:
    server = FakeServer()
    configs = BrokerConfigs(server, DynamicBrokerConfigStore(tmp_path))
    entries = {
        e.name: e
        for e in configs.describe("1", None, include_synonyms=True, include_documentation=False)
    }
    assert entries["num.io.threads"].config_source == 4 and entries["num.io.threads"].value == "4"
    assert (
        entries["num.network.threads"].config_source == 5
        and entries["num.network.threads"].value == "3"
    )
    await configs.alter("", {"num.io.threads": "6"})  # cluster-wide default
    await configs.alter("1", {"num.io.threads": "8"})  # per broker wins
    assert server.io_threads == 8
    layered = configs.describe(
        "1", ["num.io.threads"], include_synonyms=True, include_documentation=False
    )[0]
    assert [s.source for s in layered.synonyms] == [2, 3, 4, 5]
    assert [
        e.name
        for e in configs.describe("", None, include_synonyms=False, include_documentation=False)
    ] == ["num.io.threads"]
    with pytest.raises(KafkaError) as too_small:
        await configs.alter("1", {"num.io.threads": "1"})
    assert too_small.value.error_code == ErrorCode.INVALID_REQUEST and server.io_threads == 8
    await configs.alter("1", {"num.io.threads": "5"}, validate_only=True)
    assert server.io_threads == 8
    with pytest.raises(KafkaError):
        await configs.alter("1", {"queued.max.requests": "5"})


async def test_a_produce_on_a_quiet_loop_lets_the_log_write_its_batch_there() -> None:
    """Issue 19 item 7: the handler pool's `bulk_on_loop` reaches the log's append, also
    where the append runs the request's own checks (min.insync.replicas)."""
    log = FakeLog(FakeTopic("t", 1), FakeTopic("isr", 1, {"min.insync.replicas": "2"}))
    seen: list[bool] = []
    for name in ("t", "isr"):
        partition = log.partition(name, 0)
        assert partition is not None
        real_append = partition.append

        async def recording_append(*args: Any, real: Any = real_append, **kwargs: Any) -> Any:
            seen.append(args[2].write_on_loop)
            return await real(*args, **kwargs)

        partition.append = recording_append  # type: ignore[method-assign]
    handler = ProduceHandler(log)
    for bulk_on_loop in (True, False):
        for topic, acks in (("t", 1), ("isr", -1)):
            request = FakeRequest(produce_body(topic, one_batch(10), acks), 9, bulk_on_loop)
            await handler.handle(request)  # type: ignore[arg-type]
    assert seen == [True, True, False, False]
