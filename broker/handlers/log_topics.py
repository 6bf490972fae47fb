"""Metadata's view of the log: topics, partitions led by this node, auto-creation.

Follows KafkaApis.getTopicMetadata: unknown names are created when both the
request and `auto.create.topics.enable` allow it (with `num.partitions`),
refused with INVALID_TOPIC_EXCEPTION when the name is illegal, and reported
UNKNOWN_TOPIC_OR_PARTITION otherwise; unknown ids are UNKNOWN_TOPIC_ID. Kafka
answers LEADER_NOT_AVAILABLE for a topic it has just started creating; here
creation is local and synchronous, so the new topic is reported ready.
The internal topics are never auto-created here: their owners create them
with their own partition counts.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from broker.errors import KafkaError
from broker.handlers.common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    INTERNAL_TOPICS,
    TOPIC_AUTHORIZED_OPERATIONS,
    error_code_of,
    topic_name_error,
)
from broker.handlers.log_view import LogManagerView, TopicView
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.metadata_response import (
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from broker.topology import PartitionLeader, Topology

log = logging.getLogger(__name__)


class LogTopicSource:
    def __init__(self, log_manager: LogManagerView, topology: Topology) -> None:
        self._logs = log_manager
        self._topology = topology

    async def describe_topics(
        self,
        names: Sequence[str] | None,
        allow_auto_create: bool,
        topic_ids: Sequence[uuid.UUID] = (),
        include_authorized_operations: bool = False,
    ) -> list[MetadataResponseTopic]:
        operations = (
            TOPIC_AUTHORIZED_OPERATIONS
            if include_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        result: list[MetadataResponseTopic] = []
        if names is None:
            if not topic_ids:
                result = [self.describe(t, operations) for t in self._logs.topics().values()]
        else:
            for name in dict.fromkeys(names):  # duplicates answered once, as in Kafka
                result.append(await self._describe_name(name, allow_auto_create, operations))
        for topic_id in dict.fromkeys(topic_ids):
            topic = self._logs.topic_by_id(topic_id)
            if topic is None:
                result.append(
                    MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id
                    )
                )
            else:
                result.append(self.describe(topic, operations))
        return result

    async def _describe_name(
        self, name: str, allow_auto_create: bool, operations: int
    ) -> MetadataResponseTopic:
        topic = self._logs.topic(name)
        if topic is not None:
            return self.describe(topic, operations)
        if topic_name_error(name) is not None:
            return unknown(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if not (allow_auto_create and self._logs.auto_create_topics) or name in INTERNAL_TOPICS:
            return unknown(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            topic = await self._logs.create_topic(name, self._logs.default_partitions)
        except KafkaError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:  # created concurrently
                existing = self._logs.topic(name)
                if existing is not None:
                    return self.describe(existing, operations)
            log.info("auto-creating topic %s failed: %s", name, exc)
            return unknown(name, error_code_of(exc))
        log.info("auto-created topic %s with %d partitions", name, len(topic.partitions))
        return self.describe(topic, operations)

    def describe(self, topic: TopicView, operations: int) -> MetadataResponseTopic:
        return MetadataResponseTopic(
            error_code=ErrorCode.NONE,
            name=topic.name,
            topic_id=topic.topic_id,
            # `__` names are internal as in Kafka (the pipeline's sink commit log among them).
            is_internal=topic.is_internal or topic.name.startswith("__"),
            partitions=tuple(
                describe_partition(
                    p.partition,
                    p.leader_epoch,
                    self._topology.partition_leader(topic.name, p.partition),
                )
                for p in topic.partitions
            ),
            topic_authorized_operations=operations,
        )


def describe_partition(
    index: int, leader_epoch: int, leader: PartitionLeader
) -> MetadataResponsePartition:
    """The replicas, ISR and epoch the topology gives (else replication factor 1: the
    leader is the only replica); an offline leader is LEADER_NOT_AVAILABLE with leader
    -1, as Kafka reports an offline partition."""
    node = leader.node_id
    replicas = leader.replicas if leader.replicas is not None else (node,)
    epoch = leader.leader_epoch if leader.leader_epoch is not None else leader_epoch
    if leader.online:
        return MetadataResponsePartition(
            error_code=ErrorCode.NONE,
            partition_index=index,
            leader_id=node,
            leader_epoch=epoch,
            replica_nodes=replicas,
            isr_nodes=leader.isr if leader.isr is not None else (node,),
            offline_replicas=(),
        )
    return MetadataResponsePartition(
        error_code=ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=index,
        leader_id=-1,
        leader_epoch=epoch,
        replica_nodes=replicas,
        isr_nodes=leader.isr if leader.isr is not None else (),
        offline_replicas=() if leader.replicas is not None else (node,),
    )


def unknown(name: str, error_code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error_code, name=name, is_internal=name in INTERNAL_TOPICS
    )
