"""OffsetForLeaderEpoch (key 23): where a leader epoch ended, for truncation detection.

Kafka's LeaderEpochFileCache.endOffsetFor, answered from the partition's epoch
cache (`leader-epoch-checkpoint`, kept by the log's appends, leader's and
follower's): the current epoch ends at the log end offset, an older one where the
next epoch started; an unknown (-1) or future epoch has no end (-1, -1). A log
whose cache is still empty (written before the cache existed, nothing appended
since) answers as a broker that was only ever leader: the log end offset.
"""

from __future__ import annotations

from broker.errors import KafkaError
from broker.handlers.auth_helper import TOPIC, authorize_cluster, authorized_names
from broker.handlers.common import NO_EPOCH, check_leader_epoch, error_code_of
from broker.handlers.log_view import LogManagerView, PartitionView
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from broker.protocol.messages.offset_for_leader_epoch_request import OffsetForLeaderPartition
from broker.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from broker.replication.leader_epoch_cache import LeaderEpochCache
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
UNDEFINED_OFFSET = -1


class OffsetForLeaderEpochHandler:
    api_key = API_KEY
    min_version = 2
    max_version = 4

    def __init__(self, log_manager: LogManagerView, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._logs = log_manager
        self._authorizer = authorizer

    async def handle(
        self, request: Request[OffsetForLeaderEpochRequest]
    ) -> OffsetForLeaderEpochResponse:
        body = request.body
        names = {t.topic for t in body.topics}
        # Followers (brokers) ask with CLUSTER_ACTION; consumers (KIP-320) with DESCRIBE on
        # each topic, as KafkaApis.handleOffsetForLeaderEpochRequest allows either.
        if authorize_cluster(self._authorizer, request, AclOperation.CLUSTER_ACTION):
            describable = names
        else:
            describable = authorized_names(
                self._authorizer, request, AclOperation.DESCRIBE, TOPIC, names
            )
        topics = []
        for topic in body.topics:
            partitions = []
            for wanted in topic.partitions:
                if topic.topic not in describable:
                    partitions.append(
                        error_partition(wanted.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    )
                    continue
                partition = self._logs.partition(topic.topic, wanted.partition)
                if partition is None:
                    partitions.append(
                        error_partition(wanted.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    )
                    continue
                try:
                    partitions.append(epoch_end_offset(partition, wanted))
                except KafkaError as exc:
                    partitions.append(error_partition(wanted.partition, error_code_of(exc)))
            topics.append(
                OffsetForLeaderTopicResult(topic=topic.topic, partitions=tuple(partitions))
            )
        return OffsetForLeaderEpochResponse(topics=tuple(topics))

    def error_response(self, request: Request, error_code: int) -> OffsetForLeaderEpochResponse:
        body: OffsetForLeaderEpochRequest = request.body
        return OffsetForLeaderEpochResponse(
            topics=tuple(
                OffsetForLeaderTopicResult(
                    topic=t.topic,
                    partitions=tuple(
                        error_partition(p.partition, error_code) for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )


def epoch_end_offset(partition: PartitionView, wanted: OffsetForLeaderPartition) -> EpochEndOffset:
    current = partition.leader_epoch
    check_leader_epoch(wanted.current_leader_epoch, current)
    requested = wanted.leader_epoch
    cache = getattr(partition, "epoch_cache", None)  # the broker's log has one, fakes not
    if requested == NO_EPOCH or requested > current:
        epoch, end = NO_EPOCH, UNDEFINED_OFFSET
    elif requested < current and isinstance(cache, LeaderEpochCache) and cache.entries:
        answer = cache.end_offset_for(requested, partition.log_end_offset)
        epoch, end = answer.leader_epoch, answer.end_offset
    else:  # the current epoch (its first batch may not be appended yet) ends at the log end
        epoch, end = requested, partition.log_end_offset
    return EpochEndOffset(
        error_code=ErrorCode.NONE, partition=wanted.partition, leader_epoch=epoch, end_offset=end
    )


def error_partition(index: int, error_code: int) -> EpochEndOffset:
    return EpochEndOffset(
        error_code=error_code, partition=index, leader_epoch=NO_EPOCH, end_offset=UNDEFINED_OFFSET
    )
