"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), KIP-455.

Moving replicas is the deployment's (`PartitionReassignments`): hosts coordinated
through ZooKeeper hand the targets to their controller (broker/hosts/
partition_reassignments.py); where every partition has its single replica on this
broker there is nowhere to move it. Throttles (`leader.replication.throttled.rate`)
are not applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from broker.handlers.auth_helper import check_cluster
from broker.handlers.elect_leaders import ElectionResult, TopicPartitionKey
from broker.handlers.log_view import LogManagerView
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from broker.protocol.messages.alter_partition_reassignments_response import (
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from broker.protocol.messages.list_partition_reassignments_response import (
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

Ongoing = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # replicas, adding, removing


class PartitionReassignments(Protocol):
    async def alter(
        self, changes: Mapping[TopicPartitionKey, tuple[int, ...] | None]
    ) -> dict[TopicPartitionKey, ElectionResult]:
        """Each partition's target replicas (None cancels): NONE once handed over,
        INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS."""
        ...

    def ongoing(self) -> dict[TopicPartitionKey, Ongoing]: ...


class NoReassignments:
    """One replica per partition, on this broker."""

    async def alter(
        self, changes: Mapping[TopicPartitionKey, tuple[int, ...] | None]
    ) -> dict[TopicPartitionKey, ElectionResult]:
        return {
            tp: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress.")
            if target is None
            else (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "replicas move between hosts only with zookeeper.connect",
            )
            for tp, target in changes.items()
        }

    def ongoing(self) -> dict[TopicPartitionKey, Ongoing]:
        return {}


NO_REASSIGNMENTS = NoReassignments()


def _exists(logs: LogManagerView, name: str, partition: int) -> bool:
    topic = logs.topic(name)
    return topic is not None and 0 <= partition < len(topic.partitions)


class AlterPartitionReassignmentsHandler:
    api_key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    min_version = 0
    max_version = 0

    def __init__(
        self,
        log_manager: LogManagerView,
        reassignments: PartitionReassignments = NO_REASSIGNMENTS,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._logs = log_manager
        self._reassignments = reassignments
        self._authorizer = authorizer

    async def handle(
        self, request: Request[AlterPartitionReassignmentsRequest]
    ) -> AlterPartitionReassignmentsResponse:
        check_cluster(self._authorizer, request, AclOperation.ALTER)
        results: dict[TopicPartitionKey, ElectionResult] = {}
        changes: dict[TopicPartitionKey, tuple[int, ...] | None] = {}
        for topic in request.body.topics:
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                if not _exists(self._logs, *key):
                    missing = f"The partition {key[0]}-{key[1]} does not exist."
                    results[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, missing)
                else:
                    changes[key] = None if p.replicas is None else tuple(p.replicas)
        if changes:
            results.update(await self._reassignments.alter(changes))
        by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
        for (name, partition), (code, message) in sorted(results.items()):
            by_topic.setdefault(name, []).append(
                ReassignablePartitionResponse(
                    partition_index=partition, error_code=code, error_message=message
                )
            )
        return AlterPartitionReassignmentsResponse(
            error_message=None,
            responses=tuple(
                ReassignableTopicResponse(name=name, partitions=tuple(ps))
                for name, ps in by_topic.items()
            ),
        )

    def error_response(
        self, request: Request, error_code: int
    ) -> AlterPartitionReassignmentsResponse:
        return AlterPartitionReassignmentsResponse(error_code=error_code, error_message=None)


class ListPartitionReassignmentsHandler:
    api_key = ApiKey.LIST_PARTITION_REASSIGNMENTS
    min_version = 0
    max_version = 0

    def __init__(
        self,
        reassignments: PartitionReassignments = NO_REASSIGNMENTS,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._reassignments = reassignments
        self._authorizer = authorizer

    async def handle(
        self, request: Request[ListPartitionReassignmentsRequest]
    ) -> ListPartitionReassignmentsResponse:
        check_cluster(self._authorizer, request, AclOperation.DESCRIBE)
        wanted = request.body.topics
        chosen = (
            None if wanted is None else {(t.name, p) for t in wanted for p in t.partition_indexes}
        )
        by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
        for (name, partition), (replicas, adding, removing) in sorted(
            self._reassignments.ongoing().items()
        ):
            if chosen is None or (name, partition) in chosen:
                by_topic.setdefault(name, []).append(
                    OngoingPartitionReassignment(
                        partition_index=partition,
                        replicas=replicas,
                        adding_replicas=adding,
                        removing_replicas=removing,
                    )
                )
        return ListPartitionReassignmentsResponse(
            error_message=None,
            topics=tuple(
                OngoingTopicReassignment(name=name, partitions=tuple(ps))
                for name, ps in by_topic.items()
            ),
        )

    def error_response(
        self, request: Request, error_code: int
    ) -> ListPartitionReassignmentsResponse:
        return ListPartitionReassignmentsResponse(error_code=error_code, error_message=None)
