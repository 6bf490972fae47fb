"""One member of a classic group, and what the group answers it."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from broker.protocol.error_codes import ErrorCode


@attrs.frozen
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@attrs.frozen
class JoinResult:
    """What a JoinGroup is answered with (Kafka's JoinGroupResult)."""

    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@attrs.frozen
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@attrs.frozen
class JoinParams:
    """A JoinGroup request, version differences already resolved."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True


@attrs.define
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    is_new: bool = False
    heartbeat_deadline_ms: float | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those everyone supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: members in a rebalance need no heartbeat, new members time out."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def complete_join(self, result: JoinResult) -> None:
        callback, self.join_callback = self.join_callback, None
        if callback is not None:
            callback(result)

    def complete_sync(self, result: SyncResult) -> None:
        callback, self.sync_callback = self.sync_callback, None
        if callback is not None:
            callback(result)
