"""TxnOffsetCommit (key 28), v0-3: a consumer group's offsets inside a transaction.

KafkaApis: WRITE on the transactional id, READ on the group, READ on each topic.
It goes to the group's coordinator (in a cluster, possibly another process than
the transaction's), which holds the offsets by producer id until the
transaction's marker reaches it: a commit makes them the group's committed
offsets, an abort drops them.
"""

from __future__ import annotations

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.handlers.auth_helper import GROUP, TOPIC, TRANSACTIONAL_ID, authorize, authorized_names
from broker.handlers.log_view import LogManagerView
from broker.handlers.txn_errors import producer_fenced_for
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from broker.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator
from broker.transaction.transaction_metadata import PendingOffset, TopicPartition

FENCED_FROM = 2


class TxnOffsetCommitHandler:
    api_key = ApiKey.TXN_OFFSET_COMMIT
    waits_on_replication = True  # answered once the ISR has its records
    min_version = 0
    max_version = 3

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        groups: GroupCoordinatorService,
        log_manager: LogManagerView | None = None,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._coordinator = coordinator
        self._groups = groups
        self._logs = log_manager
        self._authorizer = authorizer

    async def handle(self, request: Request[TxnOffsetCommitRequest]) -> TxnOffsetCommitResponse:
        body = request.body
        auth = self._authorizer
        if not authorize(
            auth, request, AclOperation.WRITE, TRANSACTIONAL_ID, body.transactional_id
        ):
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not authorize(auth, request, AclOperation.READ, GROUP, body.group_id):
            return self.error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        readable = authorized_names(
            auth, request, AclOperation.READ, TOPIC, (t.name for t in body.topics)
        )
        results: dict[TopicPartition, int] = {}
        offsets: dict[TopicPartition, PendingOffset] = {}
        max_metadata = self._groups.config.offset_metadata_max_bytes
        for topic in body.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if topic.name not in readable:
                    results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self._logs is not None and self._logs.partition(*tp) is None:
                    results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata.encode()) > max_metadata:
                    results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    offsets[tp] = (p.committed_offset, p.committed_leader_epoch, metadata)
        if offsets:
            error: int = self._groups.validate_transactional_commit(
                body.group_id, body.member_id, body.group_instance_id, body.generation_id
            )
            if error == ErrorCode.NONE:
                error = self._coordinator.check_txn_offset_commit(
                    body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
                )
            if error == ErrorCode.NONE:
                error = self._groups.add_transactional_offsets(
                    body.group_id, body.producer_id, body.producer_epoch, offsets
                )
            error = producer_fenced_for(request.api_version, FENCED_FROM, error)
            # Answered once the pending offsets are replicated (a replicated partition).
            stored = await self._groups.replicated(dict.fromkeys(offsets, ErrorCode(error)))
            results.update(stored)
        return self._response(body, results)

    @staticmethod
    def _response(
        body: TxnOffsetCommitRequest, results: dict[TopicPartition, int]
    ) -> TxnOffsetCommitResponse:
        return TxnOffsetCommitResponse(
            topics=tuple(
                TxnOffsetCommitResponseTopic(
                    name=t.name,
                    partitions=tuple(
                        TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=results[(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )

    def error_response(self, request: Request, error_code: int) -> TxnOffsetCommitResponse:
        body: TxnOffsetCommitRequest = request.body
        return self._response(
            body,
            {(t.name, p.partition_index): error_code for t in body.topics for p in t.partitions},
        )
