"""AddPartitionsToTxn (key 24), v0-3: the client's form, one transaction per request;
v4: the brokers' batched form (KIP-890), several transactions per request.

v0-3, as in KafkaApis: WRITE on the transactional id first; then WRITE on each
topic and existence of each partition; if any partition fails, the others answer
OPERATION_NOT_ATTEMPTED and nothing is added.

v4 is what a partition leader sends a transaction's coordinator: with
`verify_only` it asks whether the producer's open transaction holds the
partitions (before appending a transactional batch) and adds nothing. Kafka
takes it only from a principal with CLUSTER_ACTION on the cluster (checked by the
authorization middleware, `cluster_action_from`); the cluster's processes send it
over their private channel, with the cluster's own principal, as WriteTxnMarkers. v5 (TRANSACTION_ABORTABLE) is not served.
"""

from __future__ import annotations

from broker.handlers.auth_helper import (
    TOPIC,
    TRANSACTIONAL_ID,
    authorize,
    authorized_names,
)
from broker.handlers.log_view import LogManagerView
from broker.handlers.txn_errors import producer_fenced_for
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from broker.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTransaction,
)
from broker.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator

FENCED_FROM = 2
BATCHED_FROM = 4


class AddPartitionsToTxnHandler:
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    waits_on_replication = True  # answered once the ISR has its records
    min_version = 0
    max_version = 4
    cluster_action_from = BATCHED_FROM  # the brokers' form (middleware/authorization)

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

    async def handle(
        self, request: Request[AddPartitionsToTxnRequest]
    ) -> AddPartitionsToTxnResponse:
        body = request.body
        if request.api_version >= BATCHED_FROM:
            results = [await self._transaction(t) for t in body.transactions]
            return AddPartitionsToTxnResponse(results_by_transaction=tuple(results))
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

    async def _transaction(self, txn: AddPartitionsToTxnTransaction) -> AddPartitionsToTxnResult:
        """One transaction of a v4 request; its partitions' topics are the leader's
        business (it has checked them), so only the coordinator's state answers."""
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            errors = self._coordinator.verify_transaction(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
            )
        else:
            error = await self._coordinator.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
            )
            errors = dict.fromkeys(wanted, error)
        return AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id,
            topic_results=self._response(
                wanted, {tp: int(code) for tp, code in errors.items()}
            ).results_by_topic_v3_and_below,
        )

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

    def error_response(
        self, request: Request[AddPartitionsToTxnRequest], error_code: int
    ) -> AddPartitionsToTxnResponse:
        body = request.body
        if request.api_version >= BATCHED_FROM:
            return AddPartitionsToTxnResponse(error_code=error_code)
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        return self._response(wanted, dict.fromkeys(wanted, error_code))
