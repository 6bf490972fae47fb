"""A classic group's state machine (Kafka's ClassicGroup plus the classic parts of
GroupMetadataManager), sans-IO.

Time is passed in (`now`, monotonic milliseconds) and every timer is a
deadline kept here: member heartbeats, pending (MEMBER_ID_REQUIRED) members,
the join phase (initial delay or rebalance timeout) and the sync phase.
`next_deadline()` says when `on_timeout(now)` must run next; the Trio layer
sleeps until then. Answers to JoinGroup and SyncGroup may come later than
the request, so they are delivered through callbacks, which Kafka does too.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable

from broker.coordinator.group_state import VALID_PREVIOUS_STATES, GroupState
from broker.coordinator.member_metadata import (
    JoinCallback,
    JoinGroupMember,
    JoinParams,
    JoinResult,
    MemberMetadata,
    SyncCallback,
    SyncResult,
)
from broker.protocol.api import decode_message
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ConsumerProtocolSubscription

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""Kafka's classic.group.new.member.join.timeout.ms: a new member that never rejoins goes."""

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription, or None if it does not parse."""
    if len(metadata) < 2:
        return None
    version = min(int.from_bytes(metadata[:2], "big", signed=True), 3)
    if version < 0:
        return None
    try:
        subscription = decode_message(ConsumerProtocolSubscription, metadata[2:], version)
    except Exception:
        return None
    return set(subscription.topics)


class ClassicGroup:
    """One group: its members, generation, protocol and timers."""

    def __init__(
        self,
        group_id: str,
        initial_rebalance_delay_ms: int,
        on_transition: Callable[[ClassicGroup, GroupState], None] | None = None,
        protocol_type: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.on_transition = on_transition
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type = protocol_type
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, float] = {}
        self.pending_sync: set[str] = set()
        self.subscribed_topics: set[str] | None = None
        self.join_deadline_ms: float | None = None
        self.sync_deadline_ms: float | None = None
        self._initial_delay = False
        self._initial_remaining_ms = 0
        self._new_member_added = False

    # -- queries ---------------------------------------------------------------
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.is_awaiting_join for m in self.members.values())

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def next_deadline(self) -> float | None:
        deadlines = [d for d in (self.join_deadline_ms, self.sync_deadline_ms) if d is not None]
        deadlines += self.pending_members.values()
        deadlines += (
            m.heartbeat_deadline_ms
            for m in self.members.values()
            if m.heartbeat_deadline_ms is not None
        )
        return min(deadlines, default=None)

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        counts = self._protocol_support()
        return self.protocol_type == protocol_type and any(
            counts[p] == len(self.members) for p in protocols
        )

    def _protocol_support(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update(set(member.protocol_names()))
        return counts

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes its preferred candidate; ties go the leader's way."""
        counts = self._protocol_support()
        candidates = {p for p, n in counts.items() if n == len(self.members)}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda p: (votes[p], -order.get(p, len(order))))

    def current_members(self) -> tuple[JoinGroupMember, ...]:
        protocol = self.protocol_name or ""
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def load(
        self,
        generation_id: int,
        protocol_name: str | None,
        leader_id: str | None,
        members: Iterable[MemberMetadata],
    ) -> None:
        """Take a stored generation (see group_metadata_record.py): Stable with its
        members, or Empty without; no transition, as Kafka's loadGroup."""
        self.generation_id = generation_id
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        for member in members:
            self.members[member.member_id] = member
            if member.group_instance_id is not None:
                self.static_members[member.group_instance_id] = member.member_id
        if self.members:
            self.subscribed_topics = self._compute_subscribed_topics()
            self.state = GroupState.STABLE

    # -- state -------------------------------------------------------------------
    def transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise AssertionError(f"group {self.group_id}: illegal {self.state} -> {state}")
        previous, self.state = self.state, state
        if self.on_transition is not None:
            self.on_transition(self, previous)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    # -- JoinGroup ------------------------------------------------------------------
    def join(self, params: JoinParams, now: float, callback: JoinCallback) -> None:
        if self.state is GroupState.DEAD:
            callback(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, params.member_id))
            return
        names = [name for name, _ in params.protocols]
        if not self.supports_protocols(params.protocol_type, names):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, params.member_id))
            return
        if not params.member_id:
            self._join_unknown_member(params, now, callback)
        else:
            self._join_known_member(params, now, callback)
        self._check_join_complete(now)

    def _join_unknown_member(self, params: JoinParams, now: float, callback: JoinCallback) -> None:
        prefix = (
            params.group_instance_id if params.group_instance_id is not None else params.client_id
        )
        member_id = f"{prefix}-{uuid.uuid4()}"
        if params.group_instance_id is not None:
            self._join_static_member(member_id, params, now, callback)
        elif params.require_known_member_id:
            self.pending_members[member_id] = now + params.session_timeout_ms
            callback(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
        else:
            self._add_member_and_rebalance(member_id, params, now, callback)

    def _join_known_member(self, params: JoinParams, now: float, callback: JoinCallback) -> None:
        member_id = params.member_id
        if member_id in self.pending_members:
            if params.group_instance_id is not None:
                callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            del self.pending_members[member_id]
            self._add_member_and_rebalance(member_id, params, now, callback)
            return
        error = self.validate_member(member_id, params.group_instance_id)
        if error is not ErrorCode.NONE:
            callback(JoinResult(error, member_id))
            return
        member = self.members[member_id]
        state = self.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(member, params, now, callback)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(params.protocols):
                # It lost the JoinGroup response: answer again with the current generation.
                callback(self._join_result(member))
            else:
                self._update_member_and_rebalance(member, params, now, callback)
        elif state is GroupState.STABLE:
            if self.is_leader(member_id) or not member.matches(params.protocols):
                self._update_member_and_rebalance(member, params, now, callback)
            else:
                callback(self._join_result(member))
        else:
            callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_result(self, member: MemberMetadata, skip_assignment: bool = False) -> JoinResult:
        leader = self.is_leader(member.member_id)
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            self.current_members() if leader else (),
            skip_assignment,
        )

    def _join_static_member(
        self, member_id: str, params: JoinParams, now: float, callback: JoinCallback
    ) -> None:
        instance_id = params.group_instance_id
        assert instance_id is not None
        old_id = self.static_members.get(instance_id)
        if old_id is None:
            self._add_member_and_rebalance(member_id, params, now, callback)
            return
        member = self._replace_static_member(instance_id, old_id, member_id)
        self._update_member(member, params, callback)
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if self.state is GroupState.STABLE:
            if self.protocol_name == self.select_protocol():
                member.complete_join(
                    self._join_result(member, skip_assignment=self.is_leader(member_id))
                )
            else:
                self._prepare_rebalance(now)
        elif self.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(now)

    def _replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        member = self.members.pop(old_id)
        member.complete_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        member.complete_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def _add_member_and_rebalance(
        self, member_id: str, params: JoinParams, now: float, callback: JoinCallback
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=params.group_instance_id,
            client_id=params.client_id,
            client_host=params.client_host,
            rebalance_timeout_ms=params.rebalance_timeout_ms,
            session_timeout_ms=params.session_timeout_ms,
            protocol_type=params.protocol_type,
            protocols=params.protocols,
            join_callback=callback,
            is_new=True,
        )
        if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
            self._new_member_added = True
        if params.group_instance_id is not None:
            self.static_members[params.group_instance_id] = member_id
        if not self.members:
            self.protocol_type = params.protocol_type
        if self.leader_id is None:
            self.leader_id = member_id
        self.members[member_id] = member
        self.pending_members.pop(member_id, None)
        member.heartbeat_deadline_ms = now + NEW_MEMBER_JOIN_TIMEOUT_MS
        self._maybe_prepare_rebalance(now)

    def _update_member(
        self, member: MemberMetadata, params: JoinParams, callback: JoinCallback
    ) -> None:
        member.protocols = params.protocols
        member.rebalance_timeout_ms = params.rebalance_timeout_ms
        member.session_timeout_ms = params.session_timeout_ms
        # A second JoinGroup replaces the first; answer the first rather than leak it.
        member.complete_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_callback = callback

    def _update_member_and_rebalance(
        self, member: MemberMetadata, params: JoinParams, now: float, callback: JoinCallback
    ) -> None:
        self._update_member(member, params, callback)
        self._maybe_prepare_rebalance(now)

    # -- rebalances ------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, now: float) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(now)

    def _prepare_rebalance(self, now: float) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            for member in self.members.values():
                member.assignment = b""
                member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self.sync_deadline_ms = None
        self.pending_sync.clear()
        if self.state is GroupState.EMPTY:
            delay = self.initial_rebalance_delay_ms
            self._initial_delay = True
            self._initial_remaining_ms = max(self.rebalance_timeout_ms() - delay, 0)
            self._new_member_added = False
            self.join_deadline_ms = now + delay
        else:
            self._initial_delay = False
            self.join_deadline_ms = now + self.rebalance_timeout_ms()
        self.transition_to(GroupState.PREPARING_REBALANCE)

    def _check_join_complete(self, now: float) -> None:
        """Kafka's DelayedJoin.tryComplete; the initial delay always waits its time."""
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and not self._initial_delay
            and self.has_all_members_joined()
        ):
            self._complete_join(now)

    def _on_join_deadline(self, now: float) -> None:
        if self._initial_delay and self._new_member_added and self._initial_remaining_ms > 0:
            # New members keep arriving: wait a little more, up to the rebalance timeout.
            self._new_member_added = False
            delay = min(self.initial_rebalance_delay_ms, self._initial_remaining_ms)
            self._initial_remaining_ms = max(self._initial_remaining_ms - delay, 0)
            self.join_deadline_ms = now + delay
            return
        self._complete_join(now)

    def _complete_join(self, now: float) -> None:
        self.join_deadline_ms = None
        self._initial_delay = False
        for member in [m for m in self.members.values() if not m.is_awaiting_join]:
            if not member.is_static:
                self._remove(member)
        if self.members and not any(m.is_awaiting_join for m in self.members.values()):
            # Only static members that have not rejoined: wait for their session to end.
            self.join_deadline_ms = now + self.rebalance_timeout_ms()
            return
        leader = self.members.get(self.leader_id or "")
        if leader is None or not leader.is_awaiting_join:
            joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
            self.leader_id = joined.member_id if joined else None
        self._init_next_generation()
        if self.state is GroupState.EMPTY:
            return
        for member in self.members.values():
            result = self._join_result(member)
            member.is_new = False
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
            member.complete_join(result)
        self.pending_sync = set(self.members)
        self.sync_deadline_ms = now + self.rebalance_timeout_ms()

    def _init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY)

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    # -- SyncGroup ---------------------------------------------------------------------
    def sync(
        self,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now: float,
        callback: SyncCallback,
    ) -> None:
        if self.state is GroupState.DEAD:
            callback(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        error = self.validate_member(member_id, group_instance_id)
        if error is ErrorCode.NONE and generation_id != self.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is ErrorCode.NONE and (
            (protocol_type is not None and protocol_type != self.protocol_type)
            or (protocol_name is not None and protocol_name != self.protocol_name)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is ErrorCode.NONE and self.state is GroupState.EMPTY:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is ErrorCode.NONE and self.state is GroupState.PREPARING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not ErrorCode.NONE:
            callback(SyncResult(error))
            return
        member = self.members[member_id]
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline_ms = None
        if self.state is GroupState.STABLE:
            callback(self._sync_result(member))
            return
        member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_callback = callback
        if self.is_leader(member_id):
            for other in self.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            self.transition_to(GroupState.STABLE)
            for other in self.members.values():
                other.complete_sync(self._sync_result(other))

    def _sync_result(self, member: MemberMetadata) -> SyncResult:
        return SyncResult(ErrorCode.NONE, self.protocol_type, self.protocol_name, member.assignment)

    # -- Heartbeat and LeaveGroup --------------------------------------------------------
    def heartbeat(
        self, member_id: str, group_instance_id: str | None, generation_id: int, now: float
    ) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if self.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.touch(member_id, now)
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def touch(self, member_id: str, now: float) -> None:
        """Reset a member's session timer (heartbeats, syncs and commits do)."""
        member = self.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline_ms = now + member.session_timeout_ms

    def leave(self, member_id: str, group_instance_id: str | None, now: float) -> ErrorCode:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != existing:
                return ErrorCode.FENCED_INSTANCE_ID
            self.remove_member_and_update(existing, now)
            return ErrorCode.NONE
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._check_join_complete(now)
            return ErrorCode.NONE
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.remove_member_and_update(member_id, now)
        return ErrorCode.NONE

    def _remove(self, member: MemberMetadata) -> None:
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        del self.members[member.member_id]
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member.member_id:
            del self.static_members[instance_id]
        self.pending_sync.discard(member.member_id)
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def remove_member_and_update(self, member_id: str, now: float) -> None:
        self._remove(self.members[member_id])
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(now)
        elif self.state is GroupState.PREPARING_REBALANCE:
            self._check_join_complete(now)

    # -- timers ---------------------------------------------------------------------------
    def on_timeout(self, now: float) -> None:
        """Fire every deadline that has passed."""
        if self.state is GroupState.DEAD:
            return
        for member_id, pending_deadline in list(self.pending_members.items()):
            if pending_deadline <= now:
                del self.pending_members[member_id]
                self._check_join_complete(now)
        for member in list(self.members.values()):
            deadline = member.heartbeat_deadline_ms
            if (
                deadline is None
                or deadline > now
                or self.members.get(member.member_id) is not member
            ):
                continue
            member.heartbeat_deadline_ms = None
            if not member.has_satisfied_heartbeat():
                log.info(
                    "member %s of group %s has failed (session timeout); removing it",
                    member.member_id,
                    self.group_id,
                )
                self.remove_member_and_update(member.member_id, now)
        if self.sync_deadline_ms is not None and self.sync_deadline_ms <= now:
            self.sync_deadline_ms = None
            if self.pending_sync and self.state in (
                GroupState.COMPLETING_REBALANCE,
                GroupState.STABLE,
            ):
                log.info(
                    "group %s: members %s did not sync in time", self.group_id, self.pending_sync
                )
                for member_id in list(self.pending_sync):
                    if member_id in self.members:
                        self._remove(self.members[member_id])
                self.pending_sync.clear()
                self._maybe_prepare_rebalance(now)
        if (
            self.join_deadline_ms is not None
            and self.join_deadline_ms <= now
            and self.state is GroupState.PREPARING_REBALANCE
        ):
            self._on_join_deadline(now)

    def mark_dead(self) -> None:
        for member in list(self.members.values()):
            self._remove(member)
        self.pending_members.clear()
        self.join_deadline_ms = None
        self.sync_deadline_ms = None
        self.transition_to(GroupState.DEAD)
