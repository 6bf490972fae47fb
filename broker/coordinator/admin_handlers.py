"""API handlers that look at or remove groups: DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.net.request import Request
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

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
"""READ, DELETE and DESCRIBE: what a group allows without an authorizer."""


class DescribeGroupsHandler:
    api_key = 15
    min_version = 0
    max_version = 5

    def __init__(self, service: GroupCoordinatorService) -> None:
        self._service = service

    async def handle(self, request: Request) -> DescribeGroupsResponse:
        body: DescribeGroupsRequest = request.body
        operations = (
            GROUP_OPERATIONS
            if body.include_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        groups = []
        for group_id in body.groups:
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

    api_key = 16
    min_version = 0
    max_version = 5

    def __init__(self, service: GroupCoordinatorService) -> None:
        self._service = service

    async def handle(self, request: Request) -> ListGroupsResponse:
        body: ListGroupsRequest = request.body
        groups = self._service.coordinator.list_groups(body.states_filter, body.types_filter)
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
    api_key = 42
    min_version = 0
    max_version = 2

    def __init__(self, service: GroupCoordinatorService) -> None:
        self._service = service

    async def handle(self, request: Request) -> DeleteGroupsResponse:
        body: DeleteGroupsRequest = request.body
        results = self._service.delete_groups(body.groups_names)
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
