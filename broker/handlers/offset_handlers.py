"""API handlers for committed offsets: OffsetCommit, OffsetFetch, OffsetDelete."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TypeVar

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import OffsetCommitItem
from broker.coordinator.offset_store import OffsetAndMetadata, TopicPartition
from broker.handlers.api_handler import Deferred
from broker.handlers.auth_helper import GROUP, TOPIC, authorize, authorized_names, check_group
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from broker.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from broker.protocol.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from broker.protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

P = TypeVar("P")
T = TypeVar("T")
Fetched = list[tuple[TopicPartition, OffsetAndMetadata | None]]


def _by_topic(items: list[tuple[TopicPartition, ErrorCode]]) -> dict[str, list[tuple[int, int]]]:
    topics: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (topic, partition), error in items:
        topics[topic].append((partition, int(error)))
    return topics


def _committed_by_topic(
    fetched: Fetched,
    partition: Callable[..., P],
    topic: Callable[..., T],
    **partition_fields: int,
) -> tuple[T, ...]:
    """OffsetFetch's topics (before v8, or one group's from v8): unknown offsets are -1."""
    topics: dict[str, list[P]] = defaultdict(list)
    for (name, index), om in fetched:
        topics[name].append(
            partition(
                partition_index=index,
                committed_offset=-1 if om is None else om.offset,
                committed_leader_epoch=-1 if om is None else om.leader_epoch,
                metadata="" if om is None else om.metadata,
                **partition_fields,
            )
        )
    return tuple(topic(name=t, partitions=tuple(p)) for t, p in topics.items())


class OffsetCommitHandler:
    """v2+ (Kafka 4's range); generation -1 commits for standalone consumers."""

    api_key = ApiKey.OFFSET_COMMIT
    min_version = 2
    max_version = 9

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(
        self, request: Request[OffsetCommitRequest]
    ) -> OffsetCommitResponse | Deferred:
        body = request.body
        check_group(self._authorizer, request, AclOperation.READ, body.group_id)
        readable = authorized_names(
            self._authorizer, request, AclOperation.READ, TOPIC, (t.name for t in body.topics)
        )
        offsets = {
            (t.name, p.partition_index): OffsetCommitItem(
                p.committed_offset, p.committed_leader_epoch, p.committed_metadata
            )
            for t in body.topics
            if t.name in readable
            for p in t.partitions
        }
        results: dict[TopicPartition, ErrorCode] = {
            (t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for t in body.topics
            if t.name not in readable
            for p in t.partitions
        }
        if offsets or not results:
            results |= self._service.commit_offsets(
                body.group_id,
                body.generation_id_or_member_epoch,
                body.member_id,
                body.group_instance_id,
                offsets,
                request.api_version,
            )
            wait = self._service.replication_of(results)
            if wait is not None:
                # Acknowledged once the ISR has it, answered outside the handler as
                # Produce's acks=all is: a handler waiting here would hold back the
                # followers' Fetch requests that complete it (with num.io.threads commits
                # at once, until the ISR shrinks).
                async def replicated() -> OffsetCommitResponse:
                    assert wait is not None
                    return self._answer(body, await wait())

                return Deferred(replicated)
        return self._answer(body, results)

    def _answer(
        self, body: OffsetCommitRequest, results: dict[TopicPartition, ErrorCode]
    ) -> OffsetCommitResponse:
        return self._response(
            [
                ((t.name, p.partition_index), results[(t.name, p.partition_index)])
                for t in body.topics
                for p in t.partitions
            ]
        )

    @staticmethod
    def _response(items: list[tuple[TopicPartition, ErrorCode]]) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            topics=tuple(
                OffsetCommitResponseTopic(
                    name=topic,
                    partitions=tuple(
                        OffsetCommitResponsePartition(partition_index=p, error_code=e)
                        for p, e in parts
                    ),
                )
                for topic, parts in _by_topic(items).items()
            )
        )

    def error_response(self, request: Request, error_code: int) -> OffsetCommitResponse:
        body: OffsetCommitRequest = request.body
        code = ErrorCode(error_code)
        return self._response(
            [((t.name, p.partition_index), code) for t in body.topics for p in t.partitions]
        )


class OffsetFetchHandler:
    """v1+; null topics (v2+) fetch every partition; v8+ fetches several groups."""

    api_key = ApiKey.OFFSET_FETCH
    min_version = 1
    max_version = 9

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[OffsetFetchRequest]) -> OffsetFetchResponse:
        body = request.body
        if request.api_version >= 8:
            groups = []
            for group in body.groups:
                if not authorize(
                    self._authorizer, request, AclOperation.DESCRIBE, GROUP, group.group_id
                ):
                    groups.append(
                        OffsetFetchResponseGroup(
                            group_id=group.group_id,
                            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        )
                    )
                    continue
                wanted = (
                    None
                    if group.topics is None
                    else [(t.name, p) for t in group.topics for p in t.partition_indexes]
                )
                error, fetched, denied = self._fetch(
                    request, group.group_id, wanted, group.member_id, group.member_epoch
                )
                fetched, unstable = self._split_unstable(group.group_id, fetched, body)
                topics = (
                    _committed_by_topic(
                        fetched, OffsetFetchResponsePartitions, OffsetFetchResponseTopics
                    )
                    + _committed_by_topic(
                        denied,
                        OffsetFetchResponsePartitions,
                        OffsetFetchResponseTopics,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                    + _committed_by_topic(
                        unstable,
                        OffsetFetchResponsePartitions,
                        OffsetFetchResponseTopics,
                        error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT,
                    )
                )
                groups.append(
                    OffsetFetchResponseGroup(
                        group_id=group.group_id, topics=topics, error_code=error
                    )
                )
            return OffsetFetchResponse(groups=tuple(groups))
        check_group(self._authorizer, request, AclOperation.DESCRIBE, body.group_id)
        wanted = (
            None
            if body.topics is None
            else [(t.name, p) for t in body.topics for p in t.partition_indexes]
        )
        error, fetched, denied = self._fetch(request, body.group_id, wanted)
        fetched, unstable = self._split_unstable(body.group_id, fetched, body)
        partition_error = error if request.api_version < 2 else ErrorCode.NONE
        return OffsetFetchResponse(
            topics=self._topics(fetched, partition_error)
            + self._topics(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            + self._topics(unstable, ErrorCode.UNSTABLE_OFFSET_COMMIT),
            error_code=error,
        )

    def _split_unstable(
        self, group_id: str, fetched: Fetched, body: OffsetFetchRequest
    ) -> tuple[Fetched, Fetched]:
        """KIP-447: with require_stable, a partition whose offset waits in an open
        transaction answers UNSTABLE_OFFSET_COMMIT (the client retries) rather than an
        offset that the transaction is about to replace."""
        if not body.require_stable:
            return fetched, []
        pending = self._service.pending_transactional_offsets(group_id)
        if not pending:
            return fetched, []
        return (
            [f for f in fetched if f[0] not in pending],
            [(tp, None) for tp, _ in fetched if tp in pending],
        )

    def _fetch(
        self,
        request: Request,
        group_id: str,
        wanted: list[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, Fetched, Fetched]:
        """The group's offsets of the topics the principal may DESCRIBE; the partitions
        asked for by name on other topics come back apart (all topics hides them). A
        consumer group's member (v9+) must name its current epoch."""
        service = self._service
        if wanted is None:
            error, fetched = service.fetch_offsets(group_id, None, member_id, member_epoch)
            describable = authorized_names(
                self._authorizer,
                request,
                AclOperation.DESCRIBE,
                TOPIC,
                (t for (t, _), _ in fetched),
            )
            return error, [f for f in fetched if f[0][0] in describable], []
        describable = authorized_names(
            self._authorizer, request, AclOperation.DESCRIBE, TOPIC, (t for t, _ in wanted)
        )
        allowed = [tp for tp in wanted if tp[0] in describable]
        denied: Fetched = [(tp, None) for tp in wanted if tp[0] not in describable]
        if not allowed and denied:
            return ErrorCode.NONE, [], denied
        error, fetched = service.fetch_offsets(group_id, allowed, member_id, member_epoch)
        return error, fetched, denied

    @staticmethod
    def _topics(fetched: Fetched, error: ErrorCode) -> tuple[OffsetFetchResponseTopic, ...]:
        return _committed_by_topic(
            fetched, OffsetFetchResponsePartition, OffsetFetchResponseTopic, error_code=error
        )

    def error_response(self, request: Request, error_code: int) -> OffsetFetchResponse:
        body: OffsetFetchRequest = request.body
        if request.api_version >= 8:
            return OffsetFetchResponse(
                groups=tuple(
                    OffsetFetchResponseGroup(group_id=g.group_id, error_code=error_code)
                    for g in body.groups
                )
            )
        code = ErrorCode(error_code)
        fetched: Fetched = [
            ((t.name, p), None) for t in body.topics or () for p in t.partition_indexes
        ]
        return OffsetFetchResponse(topics=self._topics(fetched, code), error_code=code)


class OffsetDeleteHandler:
    api_key = ApiKey.OFFSET_DELETE
    min_version = 0
    max_version = 0

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[OffsetDeleteRequest]) -> OffsetDeleteResponse:
        body = request.body
        check_group(self._authorizer, request, AclOperation.DELETE, body.group_id)
        readable = authorized_names(
            self._authorizer, request, AclOperation.READ, TOPIC, (t.name for t in body.topics)
        )
        partitions = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        allowed = [tp for tp in partitions if tp[0] in readable]
        error, results = self._service.delete_offsets(body.group_id, allowed)
        if error is not ErrorCode.NONE:
            return OffsetDeleteResponse(error_code=error)
        for tp in partitions:
            if tp[0] not in readable:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return OffsetDeleteResponse(
            topics=tuple(
                OffsetDeleteResponseTopic(
                    name=topic,
                    partitions=tuple(
                        OffsetDeleteResponsePartition(partition_index=p, error_code=e)
                        for p, e in parts
                    ),
                )
                for topic, parts in _by_topic([(tp, results[tp]) for tp in partitions]).items()
            )
        )

    def error_response(self, request: Request, error_code: int) -> OffsetDeleteResponse:
        return OffsetDeleteResponse(error_code=error_code)
