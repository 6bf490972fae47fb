"""API handlers that look at or remove groups: DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.handlers.auth_helper import GROUP, authorize, authorize_cluster, authorized_operations
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from broker.protocol.messages.delete_groups_response import DeletableGroupResult
from broker.protocol.messages.describe_groups_response import DescribedGroup, DescribedGroupMember
from broker.protocol.messages.list_groups_response import ListedGroup
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer


class DescribeGroupsHandler:
    api_key = ApiKey.DESCRIBE_GROUPS
    min_version = 0
    max_version = 5

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[DescribeGroupsRequest]) -> DescribeGroupsResponse:
        body = request.body
        auth = self._authorizer
        groups = []
        for group_id in body.groups:
            if not authorize(auth, request, AclOperation.DESCRIBE, GROUP, group_id):
                groups.append(
                    DescribedGroup(
                        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id
                    )
                )
                continue
            operations = authorized_operations(
                auth, request, GROUP, group_id, requested=body.include_authorized_operations
            )
            summary = self._service.coordinator.describe(group_id)
            groups.append(
                DescribedGroup(
                    group_id=group_id,
                    group_state=summary.state,
                    protocol_type=summary.protocol_type,
                    protocol_data=summary.protocol,
                    members=tuple(
                        DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in summary.members
                    ),
                    authorized_operations=operations,
                )
            )
        return DescribeGroupsResponse(groups=tuple(groups))

    def error_response(self, request: Request, error_code: int) -> DescribeGroupsResponse:
        body: DescribeGroupsRequest = request.body
        return DescribeGroupsResponse(
            groups=tuple(DescribedGroup(error_code=error_code, group_id=g) for g in body.groups)
        )


class ListGroupsHandler:
    """States filter from v4, types filter (and group type) from v5."""

    api_key = ApiKey.LIST_GROUPS
    min_version = 0
    max_version = 5

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[ListGroupsRequest]) -> ListGroupsResponse:
        body = request.body
        groups = self._service.list_groups(body.states_filter, body.types_filter)
        auth = self._authorizer
        if not authorize_cluster(auth, request, AclOperation.DESCRIBE):
            # KafkaApis: without DESCRIBE on the cluster, only the groups one may describe.
            groups = [
                g
                for g in groups
                if authorize(auth, request, AclOperation.DESCRIBE, GROUP, g.group_id)
            ]
        return ListGroupsResponse(
            groups=tuple(
                ListedGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
                for g in groups
            )
        )

    def error_response(self, request: Request, error_code: int) -> ListGroupsResponse:
        return ListGroupsResponse(error_code=error_code)


class DeleteGroupsHandler:
    api_key = ApiKey.DELETE_GROUPS
    min_version = 0
    max_version = 2

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[DeleteGroupsRequest]) -> DeleteGroupsResponse:
        body = request.body
        auth = self._authorizer
        deletable = [
            g for g in body.groups_names if authorize(auth, request, AclOperation.DELETE, GROUP, g)
        ]
        results = dict.fromkeys(body.groups_names, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if deletable:
            results |= self._service.delete_groups(deletable)
        return DeleteGroupsResponse(
            results=tuple(
                DeletableGroupResult(group_id=g, error_code=results[g]) for g in body.groups_names
            )
        )

    def error_response(self, request: Request, error_code: int) -> DeleteGroupsResponse:
        body: DeleteGroupsRequest = request.body
        return DeleteGroupsResponse(
            results=tuple(
                DeletableGroupResult(group_id=g, error_code=error_code) for g in body.groups_names
            )
        )
