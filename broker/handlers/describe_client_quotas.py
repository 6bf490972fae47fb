"""DescribeClientQuotas (key 48): the configured quotas of the entities a filter matches.

Needs DESCRIBE_CONFIGS on the cluster, as in Kafka. An invalid filter (unknown
entity type, a type twice, ip mixed with user or client-id) is INVALID_REQUEST.
"""

from __future__ import annotations

from broker.errors import KafkaError
from broker.handlers.auth_helper import authorize_cluster
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from broker.protocol.messages.describe_client_quotas_response import (
    EntityData,
    EntryData,
    ValueData,
)
from broker.quotas.client_quota_configs import ClientQuotaConfigs, FilterComponent, validate_filter
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS


class DescribeClientQuotasHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 1

    def __init__(self, configs: ClientQuotaConfigs, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._configs = configs
        self._authorizer = authorizer

    async def handle(
        self, request: Request[DescribeClientQuotasRequest]
    ) -> DescribeClientQuotasResponse:
        body = request.body
        if not authorize_cluster(self._authorizer, request, AclOperation.DESCRIBE_CONFIGS):
            return self.error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            components = validate_filter(
                FilterComponent(c.entity_type, c.match_type, c.match) for c in body.components
            )
        except KafkaError as exc:
            return DescribeClientQuotasResponse(
                error_code=exc.error_code, error_message=str(exc), entries=None
            )
        found = self._configs.describe(components, body.strict)
        return DescribeClientQuotasResponse(
            error_code=ErrorCode.NONE,
            error_message=None,
            entries=tuple(
                EntryData(
                    entity=tuple(EntityData(t, n) for t, n in entity.entries),
                    values=tuple(ValueData(k, v) for k, v in sorted(values.items())),
                )
                for entity, values in found
            ),
        )

    def error_response(self, request: Request, error_code: int) -> DescribeClientQuotasResponse:
        return DescribeClientQuotasResponse(error_code=error_code, error_message=None, entries=None)
