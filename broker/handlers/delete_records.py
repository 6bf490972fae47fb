"""DeleteRecords (key 21): advance a partition's log start offset (the low watermark).

Offset -1 means "up to the high watermark"; any other negative offset, or one
past the high watermark, is OFFSET_OUT_OF_RANGE (Partition.deleteRecordsOnLeader).
"""

from __future__ import annotations

from broker.errors import KafkaError
from broker.handlers.auth_helper import TOPIC, authorized_names
from broker.handlers.log_view import LogManagerView
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from broker.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.DELETE_RECORDS
HIGH_WATERMARK = -1


class DeleteRecordsHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 2

    def __init__(self, log_manager: LogManagerView, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._logs = log_manager
        self._authorizer = authorizer

    async def handle(self, request: Request[DeleteRecordsRequest]) -> DeleteRecordsResponse:
        body = request.body
        deletable = authorized_names(
            self._authorizer, request, AclOperation.DELETE, TOPIC, (t.name for t in body.topics)
        )
        topics = []
        for topic in body.topics:
            partitions = []
            for wanted in topic.partitions:
                partition = self._logs.partition(topic.name, wanted.partition_index)
                try:
                    if topic.name not in deletable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if partition is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if wanted.offset < 0 and wanted.offset != HIGH_WATERMARK:
                        raise KafkaError(
                            ErrorCode.OFFSET_OUT_OF_RANGE, f"negative offset {wanted.offset}"
                        )
                    low = await partition.delete_records_before(wanted.offset)
                    result = DeleteRecordsPartitionResult(
                        partition_index=wanted.partition_index,
                        low_watermark=low,
                        error_code=ErrorCode.NONE,
                    )
                except KafkaError as exc:
                    result = error_partition(wanted.partition_index, exc.error_code)
                partitions.append(result)
            topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=tuple(partitions)))
        return DeleteRecordsResponse(topics=tuple(topics))

    def error_response(self, request: Request, error_code: int) -> DeleteRecordsResponse:
        body: DeleteRecordsRequest = request.body
        return DeleteRecordsResponse(
            topics=tuple(
                DeleteRecordsTopicResult(
                    name=t.name,
                    partitions=tuple(
                        error_partition(p.partition_index, error_code) for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )


def error_partition(index: int, error_code: int) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(
        partition_index=index, low_watermark=-1, error_code=error_code
    )
