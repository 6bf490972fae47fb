"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

Kafka's TransactionCoordinator.handleInitProducerId answers a null
transactional id by "blindly" allocating a fresh producer id with epoch 0,
ignoring any producer id/epoch the client sends (KIP-360's bump for idempotent
producers is done by the client; a fresh id is always safe). We do the same.
A transactional id goes to the transaction coordinator (epoch bump, fencing);
without one (unit tests) the answer is COORDINATOR_NOT_AVAILABLE. An empty
transactional id is INVALID_REQUEST, as in Kafka. PRODUCER_FENCED exists from
v4 (KIP-588); older clients get INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import logging

from broker.handlers.auth_helper import TOPIC, TRANSACTIONAL_ID, authorize, authorize_cluster
from broker.handlers.log_view import LogManagerView
from broker.handlers.txn_errors import producer_fenced_for
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.transaction.transaction_coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

API_KEY = ApiKey.INIT_PRODUCER_ID
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
FENCED_FROM = 4


class InitProducerIdHandler:
    api_key = API_KEY
    waits_on_replication = True  # answered once the ISR has its records
    min_version = 0
    max_version = 4

    def __init__(
        self,
        log_manager: LogManagerView,
        coordinator: TransactionCoordinator | None = None,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._logs = log_manager
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def handle(self, request: Request[InitProducerIdRequest]) -> InitProducerIdResponse:
        body = request.body
        refused = self._authorization_error(request, body.transactional_id)
        if refused is not None:
            return self.error_response(request, refused)
        if (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH):
            # KafkaApis.handleInitProducerIdRequest: both or neither.
            return self.error_response(request, ErrorCode.INVALID_REQUEST)
        if body.transactional_id is not None:
            if body.transactional_id == "":
                return self.error_response(request, ErrorCode.INVALID_REQUEST)
            if self._coordinator is None:
                # Registered before the transaction coordinator replaces it (data_apis).
                return self.error_response(request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            result = await self._coordinator.init_producer_id(
                body.transactional_id,
                body.transaction_timeout_ms,
                body.producer_id,
                body.producer_epoch,
            )
            return InitProducerIdResponse(
                error_code=producer_fenced_for(request.api_version, FENCED_FROM, result.error),
                producer_id=result.producer_id,
                producer_epoch=result.producer_epoch,
            )
        producer_id = await self._logs.allocate_producer_id()
        return InitProducerIdResponse(
            error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
        )

    def _authorization_error(self, request: Request, transactional_id: str | None) -> int | None:
        """KafkaApis: WRITE on the transactional id; an idempotent producer needs
        IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
        auth = self._authorizer
        if transactional_id is not None:
            if authorize(auth, request, AclOperation.WRITE, TRANSACTIONAL_ID, transactional_id):
                return None
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if authorize_cluster(auth, request, AclOperation.IDEMPOTENT_WRITE):
            return None
        context = request.context
        if auth.authorize_by_resource_type(
            context.principal, context.client_address, AclOperation.WRITE, TOPIC
        ):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    def error_response(self, request: Request, error_code: int) -> InitProducerIdResponse:
        return InitProducerIdResponse(
            error_code=error_code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
        )
