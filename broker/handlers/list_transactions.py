"""ListTransactions (key 66), v0-1: transactional ids filtered by state, producer id
and (v1, KIP-994) how long their transaction has been open; only ids the
principal may DESCRIBE are listed. Unknown state names come back in
`unknown_state_filters`, as in Kafka."""

from __future__ import annotations

import time

from broker.handlers.auth_helper import TRANSACTIONAL_ID, authorize
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from broker.protocol.messages.list_transactions_response import TransactionState
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator
from broker.transaction.transaction_state import STATE_NAMES


class ListTransactionsHandler:
    api_key = ApiKey.LIST_TRANSACTIONS
    min_version = 0
    max_version = 1

    def __init__(
        self, coordinator: TransactionCoordinator, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, request: Request[ListTransactionsRequest]) -> ListTransactionsResponse:
        body = request.body
        states = set(body.state_filters)
        unknown = tuple(s for s in body.state_filters if s not in STATE_NAMES)
        producers = set(body.producer_id_filters)
        now = int(time.time() * 1000)
        listed = []
        for tid, metadata in sorted(self._coordinator.transactions.items()):
            if states and metadata.state.value not in states:
                continue
            if producers and metadata.producer_id not in producers:
                continue
            if body.duration_filter >= 0 and (
                metadata.start_ms < 0 or now - metadata.start_ms < body.duration_filter
            ):
                continue
            if not authorize(
                self._authorizer, request, AclOperation.DESCRIBE, TRANSACTIONAL_ID, tid
            ):
                continue
            listed.append(
                TransactionState(
                    transactional_id=tid,
                    producer_id=metadata.producer_id,
                    transaction_state=metadata.state.value,
                )
            )
        return ListTransactionsResponse(
            error_code=ErrorCode.NONE,
            unknown_state_filters=unknown,
            transaction_states=tuple(listed),
        )

    def error_response(self, request: Request, error_code: int) -> ListTransactionsResponse:
        return ListTransactionsResponse(error_code=error_code)
