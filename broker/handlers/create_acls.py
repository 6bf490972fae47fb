"""CreateAcls (key 30): add ACLs, durably, for a principal allowed ALTER on the cluster.

As in Kafka: without an authorizer every creation fails SECURITY_DISABLED; a
principal without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED on
every creation; an invalid binding fails alone with INVALID_REQUEST. The new
ACLs are written to disk before they take effect, so an acknowledged ACL is
never lost and a failed write changes nothing.
"""

from __future__ import annotations

from broker.handlers.acl_requests import to_enum
from broker.handlers.auth_helper import authorize_cluster
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import CreateAclsRequest, CreateAclsResponse
from broker.protocol.messages.create_acls_request import AclCreation
from broker.protocol.messages.create_acls_response import AclCreationResult
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_invalid_reason,
)
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer, StandardAuthorizer

API_KEY = ApiKey.CREATE_ACLS
NO_AUTHORIZER = "No Authorizer is configured on the broker"


class CreateAclsHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 3

    def __init__(self, authorizer: Authorizer, store: AclStore) -> None:
        self._authorizer = authorizer
        self._store = store

    async def handle(self, request: Request[CreateAclsRequest]) -> CreateAclsResponse:
        body = request.body
        authorizer = self._authorizer
        if not isinstance(authorizer, StandardAuthorizer):
            return self._all_failed(body, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        if not authorize_cluster(authorizer, request, AclOperation.ALTER):
            return self._all_failed(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        results: list[AclCreationResult] = []
        valid: list[AclBinding] = []
        for creation in body.creations:
            binding = to_binding(creation)
            reason = binding_invalid_reason(binding)
            if reason is not None:
                results.append(
                    AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=reason)
                )
            else:
                valid.append(binding)
                results.append(AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
        if valid:
            async with self._store.lock:
                await self._store.save([*authorizer.bindings(), *valid])
                authorizer.add_acls(valid)
        return CreateAclsResponse(results=tuple(results))

    def _all_failed(
        self, body: CreateAclsRequest, error_code: int, message: str | None
    ) -> CreateAclsResponse:
        return CreateAclsResponse(
            results=tuple(
                AclCreationResult(error_code=error_code, error_message=message)
                for _ in body.creations
            )
        )

    def error_response(self, request: Request, error_code: int) -> CreateAclsResponse:
        return self._all_failed(request.body, error_code, None)


def to_binding(creation: AclCreation) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            to_enum(ResourceType, creation.resource_type),
            creation.resource_name,
            to_enum(PatternType, creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            to_enum(AclOperation, creation.operation),
            to_enum(AclPermissionType, creation.permission_type),
        ),
    )
