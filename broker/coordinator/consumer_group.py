"""A KIP-848 consumer group, sans-IO: Kafka's ConsumerGroup with the heartbeat logic of
GroupMetadataManager.consumerGroupHeartbeat and the reconciliation of
CurrentAssignmentBuilder.

Three epochs order everything. The group epoch moves whenever what the assignor
sees changes (a member joins, leaves, changes its subscription, or a subscribed
topic changes its partition count). The target assignment is recomputed for the
group epoch and carries it as the assignment epoch. Each member then converges
towards its target one heartbeat at a time: first it is told to revoke the
partitions it loses (its epoch stays until it acknowledges by no longer listing
them); only then does it move to the assignment epoch and get the partitions
that are free. A partition still owned by another member (assigned or pending
revocation) is held back, so no partition ever has two owners.

Time is the caller's monotonic milliseconds; the group keeps one deadline per
member (its session, and while it revokes, its rebalance timeout).
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Mapping

import attrs

from broker.coordinator.consumer_group_assignors import ASSIGNORS
from broker.coordinator.consumer_group_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
    TopicPartitionSet,
)
from broker.protocol.error_codes import ErrorCode

GROUP_TYPE_CONSUMER = "consumer"


@attrs.frozen
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")
    """The first is the default (`group.consumer.assignors`)."""


@attrs.frozen
class HeartbeatParams:
    """ConsumerGroupHeartbeat's fields; None where the client sent no change."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitionSet | None = None
    client_id: str = ""
    client_host: str = ""


@attrs.frozen
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitionSet | None = None
    """Sent when it changed or the request was a full one (a join or a resync)."""


def _error(error: ErrorCode, message: str, member_id: str = "", epoch: int = 0) -> HeartbeatResult:
    return HeartbeatResult(error, message, member_id, epoch)


def _compile(regex: str) -> re.Pattern[str] | None:
    """Kafka uses RE2/J; Python's `re` accepts a superset, matched against the whole name."""
    try:
        return re.compile(regex)
    except re.error:
        return None


class ConsumerGroup:
    def __init__(
        self, group_id: str, config: ConsumerGroupConfig, topics: Mapping[str, int] | None = None
    ) -> None:
        """`topics`: the partition counts known before the first heartbeat (a group loaded
        from its records: those it last assigned)."""
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, TopicPartitionSet] = {}
        self.owners: dict[tuple[str, int], str] = {}
        """Partition -> the member that owns it (assigned or pending its revocation)."""
        self.static_members: dict[str, str] = {}
        self.session_deadlines: dict[str, float] = {}
        self.rebalance_deadlines: dict[str, float] = {}
        self.subscribed_partitions: dict[str, int] = {}
        """Partition counts of the subscribed topics the last target was computed with."""
        self._topics: Mapping[str, int] = {} if topics is None else topics

    # -- views ---------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState names."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.group_epoch:
            return "Assigning"
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state is not (
                MemberState.STABLE
            ):
                return "Reconciling"
        return "Stable"

    @property
    def assignor_name(self) -> str:
        """The assignor most members prefer, else the configured default."""
        preferred = Counter(
            m.server_assignor for m in self.members.values() if m.server_assignor is not None
        )
        if preferred:
            return sorted(preferred.items(), key=lambda item: (-item[1], item[0]))[0][0]
        return self.config.assignors[0]

    def subscribed_topics(self, topics: Mapping[str, int] | None = None) -> set[str]:
        """Names subscribed by name, and the existing topics some member's regex matches."""
        existing = self._topics if topics is None else topics
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                pattern = _compile(member.subscribed_topic_regex)
                if pattern is not None:
                    names.update(t for t in existing if pattern.fullmatch(t))
        return names

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            pattern = _compile(member.subscribed_topic_regex)
            if pattern is not None:
                names.update(t for t in self._topics if pattern.fullmatch(t))
        return frozenset(n for n in names if n in self._topics)

    def next_deadline(self) -> float | None:
        deadlines = [*self.session_deadlines.values(), *self.rebalance_deadlines.values()]
        return min(deadlines) if deadlines else None

    # -- ConsumerGroupHeartbeat --------------------------------------------------------------
    def heartbeat(
        self, params: HeartbeatParams, now: float, topics: Mapping[str, int]
    ) -> HeartbeatResult:
        """One heartbeat; `topics` is every topic's partition count now."""
        self._topics = topics
        if params.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(params)
        if params.subscribed_topic_regex is not None and (
            _compile(params.subscribed_topic_regex) is None
        ):
            return _error(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex {params.subscribed_topic_regex!r} is not a valid regular"
                " expression",
            )
        if params.member_epoch == 0:
            joined = self._join(params)
            if isinstance(joined, HeartbeatResult):
                return joined
            member, previous = joined
            bump = previous is None
        else:
            found = self._existing(params)
            if isinstance(found, HeartbeatResult):
                return found
            member = previous = found
            bump = False
        member = self._update_subscription(member, params)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._refresh_target(bump or self._subscription_changed(previous, member))
        member = self._reconcile(member, params.owned, now)
        self.members[member.member_id] = member
        self.session_deadlines[member.member_id] = now + self.config.session_timeout_ms
        full_request = (
            params.rebalance_timeout_ms != -1
            and (
                params.subscribed_topic_names is not None
                or params.subscribed_topic_regex is not None
            )
            and params.owned is not None
        )
        changed = previous is None or previous.assigned != member.assigned
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            member.member_id,
            member.member_epoch,
            self.config.heartbeat_interval_ms,
            member.assigned if (changed or full_request or params.member_epoch == 0) else None,
        )

    def _join(
        self, params: HeartbeatParams
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None] | HeartbeatResult:
        """The joining member, and the one it replaces (a returning static member)."""
        member_id = params.member_id or uuid.uuid4().hex
        if params.instance_id is not None:
            old_id = self.static_members.get(params.instance_id)
            old = self.members.get(old_id) if old_id is not None else None
            if old is not None:
                if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and old_id != member_id:
                    return _error(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"static member {params.instance_id} is still in the group as {old_id}",
                        member_id,
                    )
                # The static member returns under a new id: it takes over the old one's
                # assignment and epoch, so the group does not rebalance.
                self._forget(old.member_id)
                replaced = attrs.evolve(
                    old,
                    member_id=member_id,
                    member_epoch=old.previous_member_epoch
                    if old.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    else old.member_epoch,
                )
                for tp in replaced.owned:
                    self.owners[tp] = member_id
                if old.member_id in self.target:
                    self.target[member_id] = self.target.pop(old.member_id)
                return replaced, replaced
        if member_id in self.members:
            # A member that lost its state rejoins from scratch: its partitions are freed.
            self._remove(member_id)
        joining = ConsumerGroupMember(
            member_id=member_id,
            instance_id=params.instance_id,
            rebalance_timeout_ms=params.rebalance_timeout_ms,
        )
        return joining, None

    def _existing(self, params: HeartbeatParams) -> ConsumerGroupMember | HeartbeatResult:
        member = self.members.get(params.member_id)
        if member is None:
            return self._unknown(params.member_id)
        epoch = params.member_epoch
        if epoch > member.member_epoch:
            return self._fenced(member, epoch)
        if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch
            or params.owned is None
            or not params.owned <= member.assigned
        ):
            # Kafka accepts the previous epoch only from a member whose response was lost
            # and that owns nothing it no longer has.
            return self._fenced(member, epoch)
        return member

    def _unknown(self, member_id: str, epoch: int = 0) -> HeartbeatResult:
        message = f"member {member_id} is not in group {self.group_id}"
        return _error(ErrorCode.UNKNOWN_MEMBER_ID, message, member_id, epoch)

    def _fenced(self, member: ConsumerGroupMember, epoch: int) -> HeartbeatResult:
        return _error(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"member epoch {epoch} is fenced; the member's epoch is {member.member_epoch}",
            member.member_id,
        )

    @staticmethod
    def _update_subscription(
        member: ConsumerGroupMember, params: HeartbeatParams
    ) -> ConsumerGroupMember:
        changes: dict[str, object] = {"client_id": params.client_id}
        if params.client_host:
            changes["client_host"] = params.client_host
        if params.rack_id is not None:
            changes["rack_id"] = params.rack_id
        if params.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = params.rebalance_timeout_ms
        if params.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = tuple(sorted(set(params.subscribed_topic_names)))
        if params.subscribed_topic_regex is not None:
            changes["subscribed_topic_regex"] = params.subscribed_topic_regex or None
        if params.server_assignor is not None:
            changes["server_assignor"] = params.server_assignor
        return attrs.evolve(member, **changes)  # type: ignore[arg-type]

    @staticmethod
    def _subscription_changed(
        before: ConsumerGroupMember | None, after: ConsumerGroupMember
    ) -> bool:
        if before is None:
            return True
        return (
            before.subscribed_topic_names != after.subscribed_topic_names
            or before.subscribed_topic_regex != after.subscribed_topic_regex
            or before.server_assignor != after.server_assignor
        )

    # -- target assignment -----------------------------------------------------------------
    def _refresh_target(self, bump: bool) -> None:
        """Bump the epoch once if the members (`bump`) or a subscribed topic changed, then
        recompute the target if it is behind."""
        subscribed = {
            t: self._topics[t] for t in sorted(self.subscribed_topics()) if t in self._topics
        }
        if subscribed != self.subscribed_partitions:
            self.subscribed_partitions = subscribed
            bump = True
        if bump:
            self.group_epoch += 1
        if self.group_epoch <= self.assignment_epoch:
            return
        assignor = ASSIGNORS.get(self.assignor_name, ASSIGNORS[self.config.assignors[0]])
        subscriptions = {m.member_id: self.member_topics(m) for m in self.members.values()}
        previous: dict[str, dict[str, frozenset[int]]] = {}
        for member_id, partitions in self.target.items():
            by_topic: dict[str, set[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, set()).add(partition)
            previous[member_id] = {t: frozenset(p) for t, p in by_topic.items()}
        assignment = assignor(subscriptions, subscribed, previous)
        self.target = {
            member_id: frozenset(
                (topic, p) for topic, parts in assignment.get(member_id, {}).items() for p in parts
            )
            for member_id in self.members
        }
        self.assignment_epoch = self.group_epoch

    # -- reconciliation (CurrentAssignmentBuilder) --------------------------------------------
    def _reconcile(
        self, member: ConsumerGroupMember, owned: TopicPartitionSet | None, now: float
    ) -> ConsumerGroupMember:
        member_id = member.member_id
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.pending_revocation:
                return member  # still revoking
            for tp in member.pending_revocation:
                if self.owners.get(tp) == member_id:
                    del self.owners[tp]
            self.rebalance_deadlines.pop(member_id, None)
            member = attrs.evolve(member, pending_revocation=frozenset(), state=MemberState.STABLE)
        if member.member_epoch == self.assignment_epoch and member.state is MemberState.STABLE:
            return member
        target = self.target.get(member_id, frozenset())
        revoking = member.assigned - target
        if revoking:
            self.rebalance_deadlines[member_id] = now + member.rebalance_timeout_ms
            return attrs.evolve(
                member,
                assigned=member.assigned & target,
                pending_revocation=revoking,
                state=MemberState.UNREVOKED_PARTITIONS,
            )
        free = frozenset(tp for tp in target if self.owners.get(tp, member_id) == member_id)
        for tp in free:
            self.owners[tp] = member_id
        previous_epoch = member.previous_member_epoch
        if member.member_epoch != self.assignment_epoch:
            previous_epoch = member.member_epoch
        return attrs.evolve(
            member,
            assigned=free,
            member_epoch=self.assignment_epoch,
            previous_member_epoch=previous_epoch,
            state=MemberState.STABLE if free == target else MemberState.UNRELEASED_PARTITIONS,
        )

    # -- leaving, fencing, timeouts -----------------------------------------------------------
    def _leave(self, params: HeartbeatParams) -> HeartbeatResult:
        member = self.members.get(params.member_id)
        if member is None:
            return self._unknown(params.member_id, params.member_epoch)
        if (
            params.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
            and member.instance_id is not None
        ):
            # It keeps its assignment until it returns or its session ends.
            self.members[member.member_id] = attrs.evolve(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=member.member_epoch,
            )
        else:
            self._remove(member.member_id)
            self._refresh_target(True)
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, params.member_epoch)

    def _forget(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        instance_id = None if member is None else member.instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        return member

    def _remove(self, member_id: str) -> None:
        """The member is gone and its partitions are free (the caller bumps the epoch)."""
        member = self._forget(member_id)
        if member is None:
            return
        for tp in member.owned:
            if self.owners.get(tp) == member_id:
                del self.owners[tp]
        self.target.pop(member_id, None)

    def on_timeout(self, now: float) -> list[str]:
        """Fence members whose session or rebalance timeout passed; their ids."""
        expired = sorted(
            {m for m, d in self.session_deadlines.items() if d <= now}
            | {m for m, d in self.rebalance_deadlines.items() if d <= now}
        )
        for member_id in expired:
            self._remove(member_id)
        if expired:
            self._refresh_target(True)
        return expired

    # -- offsets --------------------------------------------------------------------------
    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+): no member and a
        negative epoch is an admin or a client outside the group; a member must name
        its current epoch exactly."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_commit(
        self, member_id: str, member_epoch: int, api_version: int, transactional: bool
    ) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit (OffsetCommit v9+ carries the member
        epoch where the classic protocol carries the generation). The epoch must be the
        member's current one exactly: a commit from before the member's last epoch bump
        may name partitions it has since revoked, and the client retries it once its
        heartbeat brought the new epoch. TxnOffsetCommit has no STALE_MEMBER_EPOCH code,
        so there it is ILLEGAL_GENERATION (Kafka's OffsetMetadataManager)."""
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE  # an admin or a consumer without group management
        if transactional and member_epoch == -1 and not member_id:
            return ErrorCode.NONE  # TxnOffsetCommit below v3 names no member (Kafka's rule)
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            if transactional:
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE
