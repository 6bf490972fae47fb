"""KIP-951: Produce v10+ and Fetch v16+ answers of NOT_LEADER_OR_FOLLOWER name the
leader, its epoch and its endpoint on the request's listener; older versions and other
errors carry nothing new, and the fields survive the codec."""

from __future__ import annotations

import uuid
from typing import Any

from broker.errors import KafkaError
from broker.handlers.current_leaders import CurrentLeaders
from broker.handlers.fetch import FetchHandler
from broker.handlers.produce import ProduceHandler
from broker.protocol import records as rec
from broker.protocol.api import decode_message, encode_message
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FetchRequest, FetchResponse, ProduceResponse
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.topology import BrokerAddress, PartitionLeader
from tests.handlers.fake_log import FakeLog, FakePartition, FakeTopic
from tests.handlers.test_handler_logic import one_batch, produce_body

LISTENER = "PLAINTEXT"


class MovedPartition(FakePartition):
    """A partition whose leader moved to another broker (the log's RemotePartition)."""

    async def append(self, *args: Any, **kwargs: Any) -> Any:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "led by broker 2")

    async def read(self, *args: Any, **kwargs: Any) -> Any:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "led by broker 2")


class TwoBrokers:
    """Just what CurrentLeaders asks of the Topology: broker 2 leads at epoch 7."""

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        return PartitionLeader(2, online=True, replicas=(2, 1), isr=(2, 1), leader_epoch=7)

    def brokers(self, listener_name: str) -> list[BrokerAddress]:
        port = 9092 if listener_name == LISTENER else 9999
        return [(1, "127.0.0.2", port), (2, "127.0.0.3", port)]

    def rack(self, node_id: int) -> str | None:
        return f"rack-{node_id}"


class ListenerRequest:
    def __init__(self, body: Any, api_version: int) -> None:
        self.body = body
        self.api_version = api_version
        self.context = type("Context", (), {"listener_name": LISTENER})()

    def reserve_response_memory(self, wanted: int) -> int:
        return wanted

    def keep_response_memory(self, used: int) -> None:
        pass


def moved_topic() -> tuple[FakeLog, FakeTopic]:
    topic = FakeTopic("t", 2)
    topic.partitions[0] = MovedPartition("t", 0)
    return FakeLog(topic), topic


def roundtrip(body: Any, version: int) -> Any:
    return decode_message(
        type(body), b"".join(bytes(c) for c in encode_message(body, version)), version
    )


async def test_produce_v10_and_later_name_the_new_leader_and_its_endpoint() -> None:
    log, _ = moved_topic()
    handler = ProduceHandler(log, current_leaders=CurrentLeaders(TwoBrokers()))  # type: ignore[arg-type]
    records = one_batch(10)
    for version in (10, 11):
        body = produce_body("t", records, acks=1)
        body = body._replace(
            topic_data=(
                body.topic_data[0]._replace(
                    partition_data=(
                        body.topic_data[0].partition_data[0]._replace(index=0),
                        body.topic_data[0].partition_data[0]._replace(index=1),
                    )
                ),
            )
        )
        response = await handler.handle(ListenerRequest(body, version))  # type: ignore[arg-type]
        assert isinstance(response, ProduceResponse)
        decoded = roundtrip(response, version)
        moved, here = decoded.responses[0].partition_responses
        assert moved.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (moved.current_leader.leader_id, moved.current_leader.leader_epoch) == (2, 7)
        assert here.error_code == ErrorCode.NONE and here.current_leader.leader_id == -1
        assert [(e.node_id, e.host, e.port, e.rack) for e in decoded.node_endpoints] == [
            (2, "127.0.0.3", 9092, "rack-2")
        ]
    old = await handler.handle(ListenerRequest(produce_body("t", records, acks=1), 9))  # type: ignore[arg-type]
    assert isinstance(old, ProduceResponse)
    assert old.node_endpoints == () and old.responses[0].partition_responses[0].error_code == 6


async def test_fetch_v16_and_later_name_the_new_leader_and_its_endpoint() -> None:
    log, topic = moved_topic()
    await topic.partitions[1].append(one_batch(10), rec.read_batch_header(one_batch(10)))
    handler = FetchHandler(log, current_leaders=CurrentLeaders(TwoBrokers()))  # type: ignore[arg-type]

    def body(topic_id: uuid.UUID) -> FetchRequest:
        partitions = tuple(
            FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in (0, 1)
        )
        return FetchRequest(
            max_bytes=1 << 20,
            session_epoch=-1,
            topics=(FetchTopic(topic="t", topic_id=topic_id, partitions=partitions),),
        )

    for version in (16, 17):
        response = await handler.handle(ListenerRequest(body(topic.topic_id), version))  # type: ignore[arg-type]
        assert isinstance(response, FetchResponse)
        decoded = roundtrip(response, version)
        moved, here = decoded.responses[0].partitions
        assert moved.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (moved.current_leader.leader_id, moved.current_leader.leader_epoch) == (2, 7)
        assert here.error_code == ErrorCode.NONE and here.current_leader.leader_id == -1
        assert [(e.node_id, e.port, e.rack) for e in decoded.node_endpoints] == [
            (2, 9092, "rack-2")
        ]
    older = await handler.handle(ListenerRequest(body(topic.topic_id), 15))  # type: ignore[arg-type]
    assert isinstance(older, FetchResponse) and older.node_endpoints == ()
    assert older.responses[0].partitions[0].current_leader.leader_id == -1
