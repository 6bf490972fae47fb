"""DescribeTransactions (key 65): the coordinator's view of transactional ids.

DESCRIBE on each transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
an unknown id answers TRANSACTIONAL_ID_NOT_FOUND; the partitions listed are
those of topics the principal may DESCRIBE, as in KafkaApis.
"""

from __future__ import annotations

from broker.handlers.auth_helper import TOPIC, TRANSACTIONAL_ID, authorize, authorized_names
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from broker.protocol.messages.describe_transactions_response import TopicData, TransactionState
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator


class DescribeTransactionsHandler:
    api_key = ApiKey.DESCRIBE_TRANSACTIONS
    min_version = 0
    max_version = 0

    def __init__(
        self, coordinator: TransactionCoordinator, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(
        self, request: Request[DescribeTransactionsRequest]
    ) -> DescribeTransactionsResponse:
        body = request.body
        return DescribeTransactionsResponse(
            transaction_states=tuple(self._describe(request, tid) for tid in body.transactional_ids)
        )

    def _describe(self, request: Request, tid: str) -> TransactionState:
        if not authorize(self._authorizer, request, AclOperation.DESCRIBE, TRANSACTIONAL_ID, tid):
            return _error(tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self._coordinator.owns(tid):
            return _error(tid, ErrorCode.NOT_COORDINATOR)
        metadata = self._coordinator.transactions.get(tid)
        if metadata is None:
            return _error(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.partitions):
            topics.setdefault(topic, []).append(partition)
        visible = authorized_names(self._authorizer, request, AclOperation.DESCRIBE, TOPIC, topics)
        return TransactionState(
            error_code=ErrorCode.NONE,
            transactional_id=tid,
            transaction_state=metadata.state.value,
            transaction_timeout_ms=metadata.timeout_ms,
            transaction_start_time_ms=metadata.start_ms,
            producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            topics=tuple(
                TopicData(topic=t, partitions=tuple(p)) for t, p in topics.items() if t in visible
            ),
        )

    def error_response(self, request: Request, error_code: int) -> DescribeTransactionsResponse:
        body: DescribeTransactionsRequest = request.body
        return DescribeTransactionsResponse(
            transaction_states=tuple(_error(tid, error_code) for tid in body.transactional_ids)
        )


def _error(tid: str, error_code: int) -> TransactionState:
    return TransactionState(
        error_code=error_code,
        transactional_id=tid,
        transaction_state="",
        transaction_timeout_ms=-1,
        transaction_start_time_ms=-1,
        producer_id=-1,
        producer_epoch=-1,
    )
