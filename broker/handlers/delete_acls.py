"""DeleteAcls (key 31): remove the ACLs each filter matches, for a principal allowed
ALTER on the cluster; each filter answers the ACLs it removed. The removal is on
disk before it takes effect, as for CreateAcls."""

from __future__ import annotations

from broker.handlers.acl_requests import binding_filter
from broker.handlers.auth_helper import authorize_cluster
from broker.handlers.create_acls import NO_AUTHORIZER
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from broker.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
)
from broker.security.acl import AclBinding, AclBindingFilter, AclOperation
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer, StandardAuthorizer

API_KEY = ApiKey.DELETE_ACLS


class DeleteAclsHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 3

    def __init__(self, authorizer: Authorizer, store: AclStore) -> None:
        self._authorizer = authorizer
        self._store = store

    async def handle(self, request: Request[DeleteAclsRequest]) -> DeleteAclsResponse:
        body = request.body
        authorizer = self._authorizer
        if not isinstance(authorizer, StandardAuthorizer):
            return self._all_failed(body, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        if not authorize_cluster(authorizer, request, AclOperation.ALTER):
            return self._all_failed(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        filters: list[AclBindingFilter | str] = []
        for wire in body.filters:
            parsed = binding_filter(wire)
            filters.append(parsed.invalid_reason() or parsed)
        results: list[DeleteAclsFilterResult] = []
        async with self._store.lock:
            gone: set[AclBinding] = set()
            matched: list[list[AclBinding]] = []
            for item in filters:
                found = [] if isinstance(item, str) else authorizer.describe(item)
                matched.append(found)
                gone.update(found)
            if gone:
                await self._store.save(b for b in authorizer.bindings() if b not in gone)
                for item in filters:
                    if not isinstance(item, str):
                        authorizer.remove_acls(item)
        for item, found in zip(filters, matched, strict=True):
            if isinstance(item, str):
                results.append(
                    DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=item)
                )
                continue
            results.append(
                DeleteAclsFilterResult(
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    matching_acls=tuple(matching_acl(b) for b in found),
                )
            )
        return DeleteAclsResponse(filter_results=tuple(results))

    def _all_failed(
        self, body: DeleteAclsRequest, error_code: int, message: str | None
    ) -> DeleteAclsResponse:
        return DeleteAclsResponse(
            filter_results=tuple(
                DeleteAclsFilterResult(error_code=error_code, error_message=message)
                for _ in body.filters
            )
        )

    def error_response(self, request: Request, error_code: int) -> DeleteAclsResponse:
        return self._all_failed(request.body, error_code, None)


def matching_acl(binding: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=binding.pattern.resource_type,
        resource_name=binding.pattern.name,
        pattern_type=binding.pattern.pattern_type,
        principal=binding.entry.principal,
        host=binding.entry.host,
        operation=binding.entry.operation,
        permission_type=binding.entry.permission_type,
    )
