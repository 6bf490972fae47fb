"""EndTxn (key 26), v0-3: commit or abort; answered once every marker is written.

v5 is KIP-890's "transactions v2" (an epoch bump per transaction) and v4 only
admits TRANSACTION_ABORTABLE; neither is advertised.
"""

from __future__ import annotations

from broker.handlers.auth_helper import TRANSACTIONAL_ID, authorize
from broker.handlers.txn_errors import producer_fenced_for
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import EndTxnRequest, EndTxnResponse
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator

FENCED_FROM = 2


class EndTxnHandler:
    api_key = ApiKey.END_TXN
    waits_on_replication = True  # answered once the ISR has its records
    min_version = 0
    max_version = 3

    def __init__(
        self, coordinator: TransactionCoordinator, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, request: Request[EndTxnRequest]) -> EndTxnResponse:
        body = request.body
        if not authorize(
            self._authorizer, request, AclOperation.WRITE, TRANSACTIONAL_ID, body.transactional_id
        ):
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        error = await self._coordinator.end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed
        )
        return self.error_response(
            request, producer_fenced_for(request.api_version, FENCED_FROM, error)
        )

    def error_response(self, request: Request, error_code: int) -> EndTxnResponse:
        return EndTxnResponse(error_code=error_code)
