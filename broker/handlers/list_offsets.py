"""ListOffsets (key 2): offsets by timestamp, and the earliest/latest/max-timestamp specials.

Follows UnifiedLog.fetchOffsetByTimestamp: -2 is the log start offset, -1 the
log end (the last stable offset for read_committed), -3 (v7+) the record with the largest timestamp; any other
timestamp finds the earliest record at or after it, or offset -1 when there is
none. The special answers carry timestamp -1, as in Kafka.
"""

from __future__ import annotations

from collections import Counter

from broker.errors import KafkaError
from broker.handlers.auth_helper import TOPIC, authorized_names
from broker.handlers.common import check_leader_epoch, error_code_of
from broker.handlers.log_view import LogManagerView, PartitionView
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition
from broker.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.LIST_OFFSETS
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
NO_TIMESTAMP = -1


class ListOffsetsHandler:
    api_key = API_KEY
    min_version = 1
    max_version = 7

    def __init__(self, log_manager: LogManagerView, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._logs = log_manager
        self._authorizer = authorizer

    async def handle(self, request: Request[ListOffsetsRequest]) -> ListOffsetsResponse:
        body = request.body
        counts = Counter((t.name, p.partition_index) for t in body.topics for p in t.partitions)
        duplicates = {key for key, count in counts.items() if count > 1}
        describable = authorized_names(
            self._authorizer, request, AclOperation.DESCRIBE, TOPIC, (t.name for t in body.topics)
        )
        topics = []
        for topic in body.topics:
            partitions = []
            for wanted in topic.partitions:
                if topic.name not in describable:
                    partitions.append(
                        error_partition(
                            wanted.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        )
                    )
                    continue
                if (topic.name, wanted.partition_index) in duplicates:
                    # KafkaApis: a partition listed twice is INVALID_REQUEST.
                    partitions.append(
                        error_partition(wanted.partition_index, ErrorCode.INVALID_REQUEST)
                    )
                    continue
                partition = self._logs.partition(topic.name, wanted.partition_index)
                if partition is None:
                    partitions.append(
                        error_partition(
                            wanted.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        )
                    )
                    continue
                try:
                    partitions.append(
                        list_offset(
                            partition, wanted, request.api_version, body.isolation_level == 1
                        )
                    )
                except KafkaError as exc:
                    partitions.append(error_partition(wanted.partition_index, error_code_of(exc)))
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=tuple(partitions)))
        return ListOffsetsResponse(topics=tuple(topics))

    def error_response(self, request: Request, error_code: int) -> ListOffsetsResponse:
        body: ListOffsetsRequest = request.body
        return ListOffsetsResponse(
            topics=tuple(
                ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=tuple(
                        error_partition(p.partition_index, error_code) for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )


def list_offset(
    partition: PartitionView,
    wanted: ListOffsetsPartition,
    api_version: int,
    read_committed: bool = False,
) -> ListOffsetsPartitionResponse:
    check_leader_epoch(wanted.current_leader_epoch, partition.leader_epoch)
    epoch = partition.leader_epoch
    timestamp = wanted.timestamp
    if timestamp == EARLIEST:
        offset, found_timestamp = partition.log_start_offset, NO_TIMESTAMP
    elif timestamp == LATEST:
        end = partition.last_stable_offset if read_committed else partition.log_end_offset
        offset, found_timestamp = end, NO_TIMESTAMP
    elif timestamp == MAX_TIMESTAMP and api_version >= 7:
        offset, found_timestamp = partition.max_timestamp()
    else:
        found = partition.offset_for_timestamp(timestamp)
        # ReplicaManager: a record a read_committed consumer cannot fetch yet is not found.
        if found is not None and read_committed and found[0] >= partition.last_stable_offset:
            found = None
        offset, found_timestamp = found if found is not None else (-1, NO_TIMESTAMP)
    return ListOffsetsPartitionResponse(
        partition_index=wanted.partition_index,
        error_code=ErrorCode.NONE,
        timestamp=found_timestamp,
        offset=offset,
        leader_epoch=epoch if offset >= 0 else -1,
    )


def error_partition(index: int, error_code: int) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        partition_index=index,
        error_code=error_code,
        timestamp=NO_TIMESTAMP,
        offset=-1,
        leader_epoch=-1,
    )
