"""AddPartitionsToTxn (key 24), v0-3: the client's form, one transaction per request.

v4+ is the broker-to-broker batched form (KIP-890) and is not advertised. As in
KafkaApis: WRITE on the transactional id first; then WRITE on each topic and
existence of each partition; if any partition fails, the others answer
OPERATION_NOT_ATTEMPTED and nothing is added.
"""

from __future__ import annotations

from broker.handlers.auth_helper import TOPIC, TRANSACTIONAL_ID, authorize, authorized_names
from broker.handlers.log_view import LogManagerView
from broker.handlers.txn_errors import producer_fenced_for
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from broker.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopicResult,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator

FENCED_FROM = 2


class AddPartitionsToTxnHandler:
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    min_version = 0
    max_version = 3

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        log_manager: LogManagerView,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._coordinator = coordinator
        self._logs = log_manager
        self._authorizer = authorizer

    async def handle(self, request: Request) -> AddPartitionsToTxnResponse:
        body: AddPartitionsToTxnRequest = request.body
        tid = body.v3_and_below_transactional_id
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        if not authorize(self._authorizer, request, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
            return self._response(
                wanted, {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
            )
        writable = authorized_names(
            self._authorizer, request, AclOperation.WRITE, TOPIC, (t for t, _ in wanted)
        )
        errors: dict[tuple[str, int], int] = {}
        for topic, index in wanted:
            if topic not in writable:
                errors[(topic, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif self._logs.partition(topic, index) is None:
                errors[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if errors:
            return self._response(
                wanted, {tp: errors.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
            )
        error = await self._coordinator.add_partitions(
            tid, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, wanted
        )
        code = producer_fenced_for(request.api_version, FENCED_FROM, error)
        return self._response(wanted, dict.fromkeys(wanted, code))

    @staticmethod
    def _response(
        wanted: list[tuple[str, int]], errors: dict[tuple[str, int], int]
    ) -> AddPartitionsToTxnResponse:
        topics: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
        for topic, index in wanted:
            topics.setdefault(topic, []).append(
                AddPartitionsToTxnPartitionResult(
                    partition_index=index, partition_error_code=errors[(topic, index)]
                )
            )
        return AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=tuple(
                AddPartitionsToTxnTopicResult(name=name, results_by_partition=tuple(results))
                for name, results in topics.items()
            )
        )

    def error_response(self, request: Request, error_code: int) -> AddPartitionsToTxnResponse:
        body: AddPartitionsToTxnRequest = request.body
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        return self._response(wanted, dict.fromkeys(wanted, error_code))
