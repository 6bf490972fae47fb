"""KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER names its current leader.

A Produce (v10+) or Fetch (v16+) answered NOT_LEADER_OR_FOLLOWER (Fetch: also
FENCED_LEADER_EPOCH) carries the partition's current leader and epoch, and the response
carries that leader's endpoint on the request's listener, so the client (librdkafka 2.4+,
the Java client 3.7+) sends the retry to the new leader at once instead of after a
metadata refresh and its back-off: this is what keeps a producer's stall short while
leadership moves in a rolling restart (docs/replication.md).

A hint is given only where it is known: a leader other than this broker, live, with a
leader epoch (brokers coordinated through ZooKeeper); elsewhere the answer stays as
it was, and the client refreshes its metadata as before KIP-951.

Pure functions over the generated messages, plus the small view of the `Topology`
they read, so the tests need no network.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Protocol

import attrs

from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FetchResponse, ProduceResponse
from broker.protocol.messages import fetch_response as fetch
from broker.protocol.messages import produce_response as produce
from broker.topology import Topology

PRODUCE_HINTS_FROM = 10
FETCH_HINTS_FROM = 16
_PRODUCE_CODES = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
_FETCH_CODES = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


@attrs.frozen
class LeaderHint:
    leader_id: int
    leader_epoch: int
    host: str
    port: int
    rack: str | None


class LeaderHints(Protocol):
    def hint(self, topic: str, partition: int, listener_name: str) -> LeaderHint | None:
        """The partition's current leader as a client on `listener_name` reaches it, or
        None when there is nothing better to say than "refresh your metadata"."""
        ...


class NoLeaderHints:
    def hint(self, topic: str, partition: int, listener_name: str) -> LeaderHint | None:
        return None


NO_HINTS = NoLeaderHints()


class TopologyLeaderHints:
    """Hints from the deployment's view of leadership and of the live brokers."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology

    def hint(self, topic: str, partition: int, listener_name: str) -> LeaderHint | None:
        leader = self._topology.partition_leader(topic, partition)
        if (
            not leader.online
            or leader.leader_epoch is None
            or leader.node_id == self._topology.node_id
        ):
            return None
        for node_id, host, port in self._topology.brokers(listener_name):
            if node_id == leader.node_id:
                rack = self._topology.rack(node_id)
                return LeaderHint(node_id, leader.leader_epoch, host, port, rack)
        return None


def with_produce_hints(
    response: ProduceResponse, version: int, listener_name: str, hints: LeaderHints
) -> ProduceResponse:
    if version < PRODUCE_HINTS_FROM:
        return response
    endpoints: dict[int, LeaderHint] = {}
    topics = []
    for topic in response.responses:
        partitions = []
        for answer in topic.partition_responses:
            found = None
            if answer.error_code in _PRODUCE_CODES:
                found = hints.hint(topic.name, answer.index, listener_name)
            if found is not None:
                endpoints[found.leader_id] = found
                answer = answer._replace(
                    current_leader=produce.LeaderIdAndEpoch(found.leader_id, found.leader_epoch)
                )
            partitions.append(answer)
        topics.append(topic._replace(partition_responses=tuple(partitions)))
    if not endpoints:
        return response
    return response._replace(
        responses=tuple(topics),
        node_endpoints=tuple(
            produce.NodeEndpoint(h.leader_id, h.host, h.port, h.rack)
            for _, h in sorted(endpoints.items())
        ),
    )


def with_fetch_hints(
    response: FetchResponse,
    version: int,
    listener_name: str,
    hints: LeaderHints,
    topic_name: Callable[[uuid.UUID], str | None],
) -> FetchResponse:
    """`topic_name`: a topic's name from its id, for the versions that name topics by id."""
    if version < FETCH_HINTS_FROM:
        return response
    endpoints: dict[int, LeaderHint] = {}
    topics = []
    for topic in response.responses:
        name = topic.topic or topic_name(topic.topic_id)
        partitions = []
        for data in topic.partitions:
            found = None
            if data.error_code in _FETCH_CODES and name:
                found = hints.hint(name, data.partition_index, listener_name)
            if found is not None:
                endpoints[found.leader_id] = found
                data = data._replace(
                    current_leader=fetch.LeaderIdAndEpoch(found.leader_id, found.leader_epoch)
                )
            partitions.append(data)
        topics.append(topic._replace(partitions=tuple(partitions)))
    if not endpoints:
        return response
    return response._replace(
        responses=tuple(topics),
        node_endpoints=tuple(
            fetch.NodeEndpoint(h.leader_id, h.host, h.port, h.rack)
            for _, h in sorted(endpoints.items())
        ),
    )
