"""A LeaderFetchSession over one connection of the project's own client.

The follower's requests are ordinary Kafka requests on our codec: Fetch v12 (the
replica id in the body, the last fetched epoch and the diverging-epoch answer of
KIP-595), OffsetForLeaderEpoch v4 (with the replica id) and ListOffsets v4 (with
the current leader epoch) for the leader's earliest and latest offsets. One
connection per fetcher task, used by that task alone, as Kafka's
ReplicaFetcherBlockingSend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from broker.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from broker.replication.fetcher_partition_state import (
    SendFetch,
    SendListOffsets,
    SendOffsetsForLeaderEpoch,
)
from broker.replication.leader_epoch_cache import EpochEndOffset
from broker.replication.leader_fetch_session import (
    EpochEndOffsetAnswer,
    FetchedPartition,
    FetchLimits,
    LeaderOffsets,
)
from broker.replication.topic_partition import TopicPartition

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 4
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
NO_DIVERGING_EPOCH = -1

P = TypeVar("P")
R = TypeVar("R")
T = TypeVar("T")


def _by_topic(partitions: Mapping[TopicPartition, Any]) -> dict[str, list[TopicPartition]]:
    topics: dict[str, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp)
    return topics


def _grouped(
    partitions: Mapping[TopicPartition, R],
    topic: Callable[[str, tuple[P, ...]], T],
    partition: Callable[[TopicPartition, R], P],
) -> tuple[T, ...]:
    """A request's topics, each with its partitions, in a stable order."""
    return tuple(
        topic(name, tuple(partition(tp, partitions[tp]) for tp in tps))
        for name, tps in _by_topic(partitions).items()
    )


def _error(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class KafkaFetchSession:
    def __init__(self, connection: KafkaConnection, replica_id: int) -> None:
        self._connection = connection
        self._replica_id = replica_id

    async def _request(self, request: Any, version: int) -> Any:
        """The leader's answer; a leader that closed the connection (it stopped, or
        restarts) is a ConnectionError, a failure the fetcher backs off from."""
        try:
            return await self._connection.request(request, version)
        except ConnectionClosed as exc:
            raise ConnectionError(str(exc)) from exc

    async def offsets_for_leader_epoch(
        self, partitions: Mapping[TopicPartition, SendOffsetsForLeaderEpoch]
    ) -> Mapping[TopicPartition, EpochEndOffsetAnswer]:
        request = OffsetForLeaderEpochRequest(
            replica_id=self._replica_id,
            topics=_grouped(
                partitions,
                lambda topic, ps: OffsetForLeaderTopic(topic=topic, partitions=ps),
                lambda tp, r: OffsetForLeaderPartition(
                    partition=tp.partition,
                    current_leader_epoch=r.current_leader_epoch,
                    leader_epoch=r.leader_epoch,
                ),
            ),
        )
        response = await self._request(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        return {
            TopicPartition(topic.topic, p.partition): EpochEndOffsetAnswer(
                _error(p.error_code), EpochEndOffset(p.leader_epoch, p.end_offset)
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def fetch(
        self, partitions: Mapping[TopicPartition, SendFetch], limits: FetchLimits
    ) -> Mapping[TopicPartition, FetchedPartition]:
        request = FetchRequest(
            replica_id=self._replica_id,
            max_wait_ms=limits.max_wait_ms,
            min_bytes=limits.min_bytes,
            max_bytes=limits.response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,  # no incremental fetch session: every partition, every time
            topics=_grouped(
                partitions,
                lambda topic, ps: FetchTopic(topic=topic, partitions=ps),
                lambda tp, r: FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=r.current_leader_epoch,
                    fetch_offset=r.fetch_offset,
                    last_fetched_epoch=r.last_fetched_epoch,
                    log_start_offset=r.log_start_offset,
                    partition_max_bytes=limits.partition_max_bytes,
                ),
            ),
        )
        response = await self._request(request, FETCH_VERSION)
        answers = {}
        for topic in response.responses:
            for p in topic.partitions:
                diverging = None
                if p.diverging_epoch.epoch != NO_DIVERGING_EPOCH:
                    diverging = EpochEndOffset(
                        p.diverging_epoch.epoch, p.diverging_epoch.end_offset
                    )
                answers[TopicPartition(topic.topic, p.partition_index)] = FetchedPartition(
                    _error(p.error_code), p.high_watermark, p.records or b"", diverging
                )
        return answers

    async def list_offsets(
        self, partitions: Mapping[TopicPartition, SendListOffsets]
    ) -> Mapping[TopicPartition, LeaderOffsets]:
        earliest = await self._list_offsets(partitions, EARLIEST_TIMESTAMP)
        latest = await self._list_offsets(partitions, LATEST_TIMESTAMP)
        answers = {}
        for tp in partitions:
            start_error, start = earliest.get(tp, (ErrorCode.UNKNOWN_SERVER_ERROR, -1))
            end_error, end = latest.get(tp, (ErrorCode.UNKNOWN_SERVER_ERROR, -1))
            error = start_error if start_error is not ErrorCode.NONE else end_error
            answers[tp] = LeaderOffsets(error, start, end)
        return answers

    async def _list_offsets(
        self, partitions: Mapping[TopicPartition, SendListOffsets], timestamp: int
    ) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        request = ListOffsetsRequest(
            replica_id=self._replica_id,
            isolation_level=0,
            topics=_grouped(
                partitions,
                lambda topic, ps: ListOffsetsTopic(name=topic, partitions=ps),
                lambda tp, r: ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=r.current_leader_epoch,
                    timestamp=timestamp,
                ),
            ),
        )
        response = await self._request(request, LIST_OFFSETS_VERSION)
        return {
            TopicPartition(topic.name, p.partition_index): (_error(p.error_code), p.offset)
            for topic in response.topics
            for p in topic.partitions
        }
