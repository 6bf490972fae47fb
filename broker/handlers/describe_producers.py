"""DescribeProducers (key 61): the producers a partition's log knows (Kafka's
ProducerStateManager.activeProducers), with each open transaction's first
offset, which is what `kafka-transactions.sh find-hanging` looks for. READ on
the topic (else TOPIC_AUTHORIZATION_FAILED), as in KafkaApis."""

from __future__ import annotations

from broker.handlers.auth_helper import TOPIC, authorized_names
from broker.log.log_manager import LogManager
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from broker.protocol.messages.describe_producers_response import (
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer


class DescribeProducersHandler:
    api_key = ApiKey.DESCRIBE_PRODUCERS
    min_version = 0
    max_version = 0

    def __init__(self, log_manager: LogManager, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._logs = log_manager
        self._authorizer = authorizer

    async def handle(self, request: Request[DescribeProducersRequest]) -> DescribeProducersResponse:
        body = request.body
        readable = authorized_names(
            self._authorizer, request, AclOperation.READ, TOPIC, (t.name for t in body.topics)
        )
        topics = []
        for topic in body.topics:
            partitions = []
            for index in topic.partition_indexes:
                if topic.name not in readable:
                    partitions.append(_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                partition = self._logs.partition(topic.name, index)
                if partition is None:
                    partitions.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                ongoing = partition.open_transactions()
                producers = tuple(
                    ProducerState(
                        producer_id=entry.producer_id,
                        producer_epoch=entry.epoch,
                        last_sequence=entry.last_seq,
                        last_timestamp=entry.batches[-1].timestamp if entry.batches else -1,
                        coordinator_epoch=entry.coordinator_epoch,  # so an admin abort passes
                        current_txn_start_offset=ongoing.get(entry.producer_id, -1),
                    )
                    for entry in partition.producer_state.entries()
                )
                partitions.append(
                    PartitionResponse(
                        partition_index=index, error_code=ErrorCode.NONE, active_producers=producers
                    )
                )
            topics.append(TopicResponse(name=topic.name, partitions=tuple(partitions)))
        return DescribeProducersResponse(topics=tuple(topics))

    def error_response(self, request: Request, error_code: int) -> DescribeProducersResponse:
        body: DescribeProducersRequest = request.body
        return DescribeProducersResponse(
            topics=tuple(
                TopicResponse(
                    name=t.name,
                    partitions=tuple(_error(i, error_code) for i in t.partition_indexes),
                )
                for t in body.topics
            )
        )


def _error(index: int, error_code: int) -> PartitionResponse:
    return PartitionResponse(partition_index=index, error_code=error_code)
