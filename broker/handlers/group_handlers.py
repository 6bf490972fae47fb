"""API handlers of the classic group protocol: FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup.

JoinGroup and SyncGroup often cannot be answered at once (the rebalance, or
the leader's assignment, is still pending): they return a `Deferred` that
the API layer awaits in its own nursery, so no handler task is held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import trio

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.member_metadata import JoinParams, JoinResult, SyncResult
from broker.handlers.api_handler import Deferred
from broker.handlers.auth_helper import GROUP, TRANSACTIONAL_ID, authorize, check_group
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from broker.protocol.messages.find_coordinator_response import Coordinator
from broker.protocol.messages.join_group_response import JoinGroupResponseMember
from broker.protocol.messages.leave_group_response import MemberResponse
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.topology import SingleProcessTopology, Topology

COORDINATOR_TYPE_GROUP = 0
COORDINATOR_TYPE_TRANSACTION = 1

T = TypeVar("T")


class Pending(Generic[T]):
    """A result delivered later by a callback, awaited by a Deferred."""

    def __init__(self) -> None:
        self.event = trio.Event()
        self.value: T | None = None

    def set(self, value: T) -> None:
        self.value = value
        self.event.set()

    def answer(self, request: Request, build: Callable[[Request, T], Any]) -> Any:
        """The response now if the result is in, else a Deferred that waits for it."""
        if self.event.is_set():
            assert self.value is not None
            return build(request, self.value)

        async def wait() -> Any:
            await self.event.wait()
            assert self.value is not None
            return build(request, self.value)

        return Deferred(wait)


def client_host(request: Request) -> str:
    return "/" + request.context.client_address


class FindCoordinatorHandler:
    """The coordinator of a group or transactional id, as the topology places it."""

    api_key = ApiKey.FIND_COORDINATOR
    min_version = 0
    max_version = 6

    def __init__(
        self,
        node_id: int,
        advertised: Callable[[str], tuple[str, int]],
        *,
        authorizer: Authorizer = ALLOW_ALL,
        topology: Topology | None = None,
    ) -> None:
        self._authorizer = authorizer
        # Groups and transactional ids share one placement rule (Kafka hashes both onto
        # the partitions of their internal topics); a coordinator that is down is None.
        self._topology = topology or SingleProcessTopology(node_id, advertised)

    def _coordinator(self, request: Request, key: str, key_type: int) -> Coordinator:
        refused = self._authorization_error(request, key, key_type)
        if refused is not None:
            return Coordinator(
                key=key, node_id=-1, host="", port=-1, error_code=refused, error_message=None
            )
        if key_type in (COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION):
            found = self._topology.locate_coordinator(
                key,
                request.context.listener_name,
                transaction=key_type == COORDINATOR_TYPE_TRANSACTION,
            )
            if found is None:
                return Coordinator(
                    key=key,
                    node_id=-1,
                    host="",
                    port=-1,
                    error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    error_message="the coordinator is not available",
                )
            node, host, port = found
            return Coordinator(key=key, node_id=node, host=host, port=port, error_message=None)
        error = ErrorCode.INVALID_REQUEST
        message = f"unknown coordinator key type {key_type}"
        return Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message
        )

    def _authorization_error(self, request: Request, key: str, key_type: int) -> int | None:
        """KafkaApis: DESCRIBE on the group, or on the transactional id."""
        if key_type == COORDINATOR_TYPE_GROUP:
            if not authorize(self._authorizer, request, AclOperation.DESCRIBE, GROUP, key):
                return ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif key_type == COORDINATOR_TYPE_TRANSACTION and not authorize(
            self._authorizer, request, AclOperation.DESCRIBE, TRANSACTIONAL_ID, key
        ):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None

    async def handle(self, request: Request[FindCoordinatorRequest]) -> FindCoordinatorResponse:
        body = request.body
        if request.api_version >= 4:
            return FindCoordinatorResponse(
                coordinators=tuple(
                    self._coordinator(request, key, body.key_type) for key in body.coordinator_keys
                )
            )
        c = self._coordinator(request, body.key, body.key_type)
        return FindCoordinatorResponse(
            error_code=c.error_code,
            error_message=c.error_message,
            node_id=c.node_id,
            host=c.host,
            port=c.port,
        )

    def error_response(self, request: Request, error_code: int) -> FindCoordinatorResponse:
        body: FindCoordinatorRequest = request.body
        if request.api_version >= 4:
            return FindCoordinatorResponse(
                coordinators=tuple(
                    Coordinator(key=k, node_id=-1, host="", port=-1, error_code=error_code)
                    for k in body.coordinator_keys
                )
            )
        return FindCoordinatorResponse(error_code=error_code, node_id=-1, host="", port=-1)


class JoinGroupHandler:
    api_key = ApiKey.JOIN_GROUP
    min_version = 0
    max_version = 9

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[JoinGroupRequest]) -> Any:
        body = request.body
        check_group(self._authorizer, request, AclOperation.READ, body.group_id)
        version = request.api_version
        params = JoinParams(
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            client_id=request.header.client_id or "",
            client_host=client_host(request),
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=(
                body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
            ),
            protocol_type=body.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
            require_known_member_id=version >= 4,
        )
        pending: Pending[JoinResult] = Pending()
        self._service.join(body.group_id, params, pending.set)
        return pending.answer(request, self._response)

    @staticmethod
    def _response(request: Request, result: JoinResult) -> JoinGroupResponse:
        version = request.api_version
        protocol_name = result.protocol_name
        if version < 7 and protocol_name is None:
            protocol_name = ""
        return JoinGroupResponse(
            error_code=result.error,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=protocol_name,
            leader=result.leader,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=tuple(
                JoinGroupResponseMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    metadata=m.metadata,
                )
                for m in result.members
            ),
        )

    def error_response(self, request: Request, error_code: int) -> JoinGroupResponse:
        body: JoinGroupRequest = request.body
        return self._response(request, JoinResult(ErrorCode(error_code), body.member_id))


class SyncGroupHandler:
    api_key = ApiKey.SYNC_GROUP
    min_version = 0
    max_version = 5

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[SyncGroupRequest]) -> Any:
        body = request.body
        check_group(self._authorizer, request, AclOperation.READ, body.group_id)
        pending: Pending[SyncResult] = Pending()
        self._service.sync(
            body.group_id,
            body.member_id,
            body.group_instance_id,
            body.generation_id,
            body.protocol_type,
            body.protocol_name,
            {a.member_id: bytes(a.assignment) for a in body.assignments},
            pending.set,
        )
        return pending.answer(request, self._response)

    @staticmethod
    def _response(request: Request, result: SyncResult) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    def error_response(self, request: Request, error_code: int) -> SyncGroupResponse:
        return SyncGroupResponse(error_code=error_code)


class HeartbeatHandler:
    api_key = ApiKey.HEARTBEAT
    min_version = 0
    max_version = 4

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    async def handle(self, request: Request[HeartbeatRequest]) -> HeartbeatResponse:
        body = request.body
        check_group(self._authorizer, request, AclOperation.READ, body.group_id)
        error = self._service.heartbeat(
            body.group_id, body.member_id, body.group_instance_id, body.generation_id
        )
        return HeartbeatResponse(error_code=error)

    def error_response(self, request: Request, error_code: int) -> HeartbeatResponse:
        return HeartbeatResponse(error_code=error_code)


class LeaveGroupHandler:
    """v3+ leaves a batch of members (static members by instance id)."""

    api_key = ApiKey.LEAVE_GROUP
    min_version = 0
    max_version = 5

    def __init__(
        self, service: GroupCoordinatorService, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._service = service
        self._authorizer = authorizer

    @staticmethod
    def _members(request: Request) -> list[tuple[str, str | None]]:
        body: LeaveGroupRequest = request.body
        if request.api_version >= 3:
            return [(m.member_id, m.group_instance_id) for m in body.members]
        return [(body.member_id, None)]

    async def handle(self, request: Request[LeaveGroupRequest]) -> LeaveGroupResponse:
        body = request.body
        check_group(self._authorizer, request, AclOperation.READ, body.group_id)
        members = self._members(request)
        error, errors = self._service.leave(body.group_id, members)
        return self._response(request, members, error, errors)

    @staticmethod
    def _response(
        request: Request,
        members: list[tuple[str, str | None]],
        error: ErrorCode,
        errors: list[ErrorCode],
    ) -> LeaveGroupResponse:
        if request.api_version < 3:
            if error is ErrorCode.NONE:
                error = next((e for e in errors if e is not ErrorCode.NONE), ErrorCode.NONE)
            return LeaveGroupResponse(error_code=error)
        return LeaveGroupResponse(
            error_code=error,
            members=tuple(
                MemberResponse(member_id=m, group_instance_id=i, error_code=e)
                for (m, i), e in zip(members, errors, strict=False)
            ),
        )

    def error_response(self, request: Request, error_code: int) -> LeaveGroupResponse:
        members = self._members(request)
        code = ErrorCode(error_code)
        return self._response(request, members, code, [code] * len(members))
