"""AddOffsetsToTxn (key 25): the group whose offsets the transaction will commit.

KafkaApis: WRITE on the transactional id, READ on the group. Kafka adds the
group's `__consumer_offsets` partition to the transaction; here the coordinator
remembers the group, whose pending offsets it commits or drops at the end.
"""

from __future__ import annotations

from broker.handlers.auth_helper import GROUP, TRANSACTIONAL_ID, authorize
from broker.handlers.txn_errors import producer_fenced_for
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator

FENCED_FROM = 2


class AddOffsetsToTxnHandler:
    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    waits_on_replication = True  # answered once the ISR has its records
    min_version = 0
    max_version = 3

    def __init__(
        self, coordinator: TransactionCoordinator, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, request: Request[AddOffsetsToTxnRequest]) -> AddOffsetsToTxnResponse:
        body = request.body
        auth = self._authorizer
        if not authorize(
            auth, request, AclOperation.WRITE, TRANSACTIONAL_ID, body.transactional_id
        ):
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not authorize(auth, request, AclOperation.READ, GROUP, body.group_id):
            return self.error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error = await self._coordinator.add_offsets(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
        )
        return self.error_response(
            request, producer_fenced_for(request.api_version, FENCED_FROM, error)
        )

    def error_response(self, request: Request, error_code: int) -> AddOffsetsToTxnResponse:
        return AddOffsetsToTxnResponse(error_code=error_code)
