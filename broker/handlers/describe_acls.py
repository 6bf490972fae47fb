"""DescribeAcls (key 29): the ACLs a filter matches, for a principal allowed DESCRIBE
on the cluster, grouped by resource pattern as Kafka answers them."""

from __future__ import annotations

from broker.handlers.acl_requests import binding_filter
from broker.handlers.auth_helper import authorize_cluster
from broker.handlers.create_acls import NO_AUTHORIZER
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeAclsRequest, DescribeAclsResponse
from broker.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
)
from broker.security.acl import AccessControlEntry, AclOperation, ResourcePattern
from broker.security.authorizer import Authorizer, StandardAuthorizer

API_KEY = ApiKey.DESCRIBE_ACLS


class DescribeAclsHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 3

    def __init__(self, authorizer: Authorizer) -> None:
        self._authorizer = authorizer

    async def handle(self, request: Request[DescribeAclsRequest]) -> DescribeAclsResponse:
        body = request.body
        authorizer = self._authorizer
        if not isinstance(authorizer, StandardAuthorizer):
            return DescribeAclsResponse(
                error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER
            )
        if not authorize_cluster(authorizer, request, AclOperation.DESCRIBE):
            return self.error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        wanted = binding_filter(body)
        reason = wanted.invalid_reason()
        if reason is not None:
            return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=reason)
        grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in authorizer.describe(wanted):
            grouped.setdefault(binding.pattern, []).append(binding.entry)
        return DescribeAclsResponse(
            error_code=ErrorCode.NONE,
            error_message=None,
            resources=tuple(
                DescribeAclsResource(
                    resource_type=pattern.resource_type,
                    resource_name=pattern.name,
                    pattern_type=pattern.pattern_type,
                    acls=tuple(
                        AclDescription(
                            principal=e.principal,
                            host=e.host,
                            operation=e.operation,
                            permission_type=e.permission_type,
                        )
                        for e in entries
                    ),
                )
                for pattern, entries in grouped.items()
            ),
        )

    def error_response(self, request: Request, error_code: int) -> DescribeAclsResponse:
        return DescribeAclsResponse(error_code=error_code, error_message=None)
