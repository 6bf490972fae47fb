"""KIP-951: NOT_LEADER_OR_FOLLOWER answers name the current leader and its endpoint, in
the versions that carry them, and survive the wire."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from broker.handlers.leader_hints import (
    NO_HINTS,
    LeaderHint,
    TopologyLeaderHints,
    with_fetch_hints,
    with_produce_hints,
)
from broker.protocol.api import ApiKey, decode_response, encode_response
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FetchResponse, ProduceResponse
from broker.protocol.messages import fetch_response as fetch
from broker.protocol.messages import produce_response as produce
from broker.topology import BrokerAddress, PartitionLeader, SingleProcessTopology

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
HINT = LeaderHint(leader_id=3, leader_epoch=7, host="127.0.0.4", port=9094, rack="r3")


class Hints:
    """Partition 0 of "orders" is led by broker 3 on PLAINTEXT; nothing else is known."""

    def hint(self, topic: str, partition: int, listener_name: str) -> LeaderHint | None:
        known = (topic, partition, listener_name) == ("orders", 0, "PLAINTEXT")
        return HINT if known else None


def produce_response(*codes: int) -> ProduceResponse:
    return ProduceResponse(
        responses=(
            produce.TopicProduceResponse(
                name="orders",
                partition_responses=tuple(
                    produce.PartitionProduceResponse(index=i, error_code=code)
                    for i, code in enumerate(codes)
                ),
            ),
        )
    )


def wire(api_key: int, version: int, body: object) -> object:
    frame = b"".join(bytes(part) for part in encode_response(api_key, version, 1, body))
    return decode_response(api_key, version, frame[4:])[1]


def test_a_produce_answered_not_leader_names_the_leader_and_its_endpoint() -> None:
    hinted = with_produce_hints(produce_response(NOT_LEADER, 0), 10, "PLAINTEXT", Hints())
    answers = hinted.responses[0].partition_responses
    assert answers[0].current_leader == produce.LeaderIdAndEpoch(3, 7)
    assert answers[1].current_leader == produce.LeaderIdAndEpoch(-1, -1)
    assert hinted.node_endpoints == (produce.NodeEndpoint(3, "127.0.0.4", 9094, "r3"),)
    assert wire(ApiKey.PRODUCE, 10, hinted) == hinted


def test_versions_before_kip_951_and_unknown_leaders_are_answered_as_before() -> None:
    before = produce_response(NOT_LEADER)
    assert with_produce_hints(before, 9, "PLAINTEXT", Hints()) is before
    assert with_produce_hints(before, 11, "SSL", Hints()) is before
    assert with_produce_hints(before, 11, "PLAINTEXT", NO_HINTS) is before


@given(st.lists(st.sampled_from([0, NOT_LEADER, ErrorCode.FENCED_LEADER_EPOCH]), max_size=4))
def test_only_not_leader_produce_answers_get_a_hint(codes: list[int]) -> None:
    hinted = with_produce_hints(produce_response(*codes), 11, "PLAINTEXT", Hints())
    for index, answer in enumerate(hinted.responses[0].partition_responses):
        named = answer.current_leader != produce.LeaderIdAndEpoch(-1, -1)
        assert named == (index == 0 and codes[0] == NOT_LEADER)
    assert bool(hinted.node_endpoints) == (bool(codes) and codes[0] == NOT_LEADER)


def test_a_fetch_by_topic_id_answered_fenced_names_the_leader() -> None:
    topic_id = uuid.uuid4()
    response = FetchResponse(
        responses=(
            fetch.FetchableTopicResponse(
                topic_id=topic_id,
                partitions=(
                    fetch.PartitionData(
                        partition_index=0, error_code=ErrorCode.FENCED_LEADER_EPOCH
                    ),
                ),
            ),
        )
    )
    names = {topic_id: "orders"}
    hinted = with_fetch_hints(response, 16, "PLAINTEXT", Hints(), names.get)
    assert hinted.responses[0].partitions[0].current_leader == fetch.LeaderIdAndEpoch(3, 7)
    assert hinted.node_endpoints == (fetch.NodeEndpoint(3, "127.0.0.4", 9094, "r3"),)
    assert wire(ApiKey.FETCH, 16, hinted) == hinted
    assert with_fetch_hints(response, 15, "PLAINTEXT", Hints(), names.get) is response


class TwoBrokers(SingleProcessTopology):
    """Broker 1 (this one) and broker 2; broker 2 leads every partition at `epoch`."""

    def __init__(self, epoch: int | None, online: bool = True) -> None:
        super().__init__(1, lambda _listener: ("127.0.0.2", 9092))
        self._epoch, self._online = epoch, online

    def brokers(self, listener_name: str) -> list[BrokerAddress]:
        return [(1, "127.0.0.2", 9092), (2, "127.0.0.3", 9093)]

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        return PartitionLeader(2, self._online, leader_epoch=self._epoch)


def test_the_topology_hints_a_live_leader_elsewhere_with_an_epoch_only() -> None:
    assert TopologyLeaderHints(TwoBrokers(4)).hint("orders", 0, "PLAINTEXT") == LeaderHint(
        2, 4, "127.0.0.3", 9093, None
    )
    assert TopologyLeaderHints(TwoBrokers(None)).hint("orders", 0, "PLAINTEXT") is None
    assert TopologyLeaderHints(TwoBrokers(4, online=False)).hint("orders", 0, "PLAINTEXT") is None
    single = SingleProcessTopology(1, lambda _listener: ("127.0.0.2", 9092))
    assert TopologyLeaderHints(single).hint("orders", 0, "PLAINTEXT") is None
