"""GroupCoordinator: every group and its committed offsets, sans-IO.

Group-level checks (invalid ids, session-timeout bounds, unknown groups),
offset commit validation and the retention rules live here; a group's own
state machine is `ClassicGroup`. Timers of all groups are kept in one heap
so the Trio layer needs a single task that sleeps until `next_timer()`.
Monotonic time (`now`, ms) drives timers; wall-clock time (`wall_ms`) is what
is persisted (commit timestamps, when a group became empty).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import attrs

from broker.coordinator.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from broker.coordinator.consumer_group import ConsumerGroupConfig
from broker.coordinator.group_deadlines import GroupDeadlines
from broker.coordinator.group_metadata_record import group_metadata_record, load_group
from broker.coordinator.group_state import GroupState
from broker.coordinator.member_metadata import JoinCallback, JoinParams, JoinResult, SyncCallback
from broker.coordinator.member_metadata import SyncResult as SyncResult
from broker.coordinator.offset_store import (
    GroupRecord,
    OffsetAndMetadata,
    OffsetStore,
    TopicPartition,
)
from broker.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

GROUP_TYPE_CLASSIC = "classic"


@attrs.frozen
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096
    retention_check_interval_ms: int = 600000
    consumer: ConsumerGroupConfig = attrs.field(factory=ConsumerGroupConfig)


@attrs.frozen
class OffsetCommitItem:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@attrs.frozen
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@attrs.frozen
class GroupSummary:
    """Kafka's GroupSummary: metadata and assignments only when Stable."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@attrs.frozen
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = GROUP_TYPE_CLASSIC


class GroupCoordinator:
    def __init__(
        self, config: CoordinatorConfig, store: OffsetStore, wall_ms: int = 0, now: float = 0
    ) -> None:
        self.config = config
        self.store = store
        self.groups: dict[str, ClassicGroup] = {}
        self._empty_since: dict[str, int] = {}
        self._deadlines = GroupDeadlines()
        self._wall_ms = wall_ms
        for group_id in sorted(store.groups()):
            record = store.group_record(group_id) or GroupRecord()
            group = self._create(group_id, record.protocol_type or None)
            load_group(group, record, now)
            if group.state is GroupState.EMPTY:
                since = record.empty_since_ms
                self._empty_since[group_id] = since if since is not None else wall_ms
            self._reschedule(group)

    # -- groups and timers ----------------------------------------------------------
    def _create(self, group_id: str, protocol_type: str | None = None) -> ClassicGroup:
        group = ClassicGroup(
            group_id, self.config.initial_rebalance_delay_ms, self._on_transition, protocol_type
        )
        self.groups[group_id] = group
        return group

    def _on_transition(self, group: ClassicGroup, previous: GroupState) -> None:
        if group.state is GroupState.EMPTY:
            self._empty_since[group.group_id] = self._wall_ms
            self._store_group(group)
        elif group.state is GroupState.STABLE or (
            previous is GroupState.EMPTY and group.state is not GroupState.DEAD
        ):
            self._empty_since.pop(group.group_id, None)
            self._store_group(group)

    def _store_group(self, group: ClassicGroup) -> None:
        """Kafka's storeGroup: the GroupMetadata record, when it changed."""
        if group.protocol_type:
            record = group_metadata_record(group, self._empty_since.get(group.group_id))
            self.store.set_group_record(group.group_id, record)

    def _reschedule(self, group: ClassicGroup) -> None:
        self._deadlines.schedule(group.group_id, group.next_deadline())

    def next_timer(self) -> float | None:
        return self._deadlines.next_deadline()

    def fire_timers(self, now: float, wall_ms: int) -> None:
        self._wall_ms = wall_ms
        for group_id in self._deadlines.pop_due(now):
            group = self.groups.get(group_id)
            if group is not None:
                group.on_timeout(now)
                self._reschedule(group)

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -----------------------------------
    def join(
        self, group_id: str, params: JoinParams, now: float, wall_ms: int, callback: JoinCallback
    ) -> None:
        self._wall_ms = wall_ms
        if not group_id:
            callback(JoinResult(ErrorCode.INVALID_GROUP_ID, params.member_id))
            return
        cfg = self.config
        if (
            not cfg.min_session_timeout_ms
            <= params.session_timeout_ms
            <= cfg.max_session_timeout_ms
        ):
            callback(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, params.member_id))
            return
        group = self.groups.get(group_id)
        if group is None:
            if params.member_id:
                callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, params.member_id))
                return
            group = self._create(group_id)
        group.join(params, now, callback)
        if group.state is GroupState.STABLE:
            # A static member that rejoined under a new member id (Kafka stores that too).
            self._store_group(group)
        self._reschedule(group)

    def sync(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now: float,
        wall_ms: int,
        callback: SyncCallback,
    ) -> None:
        self._wall_ms = wall_ms
        if not group_id:
            callback(SyncResult(ErrorCode.INVALID_GROUP_ID))
            return
        group = self.groups.get(group_id)
        if group is None:
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        group.sync(
            member_id,
            group_instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
            now,
            callback,
        )
        self._reschedule(group)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        now: float,
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.heartbeat(member_id, group_instance_id, generation_id, now)
        self._reschedule(group)
        return error

    def leave(
        self,
        group_id: str,
        members: Sequence[tuple[str, str | None]],
        now: float,
        wall_ms: int,
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """The top-level error and one error per leaving member."""
        self._wall_ms = wall_ms
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, [ErrorCode.INVALID_GROUP_ID] * len(members)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = [group.leave(member_id, instance_id, now) for member_id, instance_id in members]
        self._reschedule(group)
        return ErrorCode.NONE, errors

    # -- offsets -------------------------------------------------------------------------------
    def _validate_offset_commit(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit.

        TxnOffsetCommit before v3 carries no member id or generation (aiokafka sends v0),
        so Kafka checks the member of a transactional commit only when one is named, and
        never refuses one for a rebalance in progress.
        """
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.NONE:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and group.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def validate_transactional_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE if generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        return self._validate_offset_commit(
            group, member_id, instance_id, generation_id, transactional=True
        )

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitItem],
        api_version: int,
        now: float,
        wall_ms: int,
    ) -> dict[TopicPartition, ErrorCode]:
        self._wall_ms = wall_ms
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                group = self._create(group_id)
            else:
                error = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if api_version >= 9
                    else ErrorCode.ILLEGAL_GENERATION
                )
                return dict.fromkeys(offsets, error)
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error is not ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, item in offsets.items():
            metadata = item.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                results[tp] = ErrorCode.NONE
                accepted[tp] = OffsetAndMetadata(item.offset, item.leader_epoch, metadata, wall_ms)
        self.store.commit(group_id, accepted)
        if member_id:
            group.touch(member_id, now)
        return results

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> tuple[ErrorCode, list[tuple[TopicPartition, OffsetAndMetadata | None]]]:
        group = self.groups.get(group_id)
        if group is not None and group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        offsets = self.store.group_offsets(group_id)
        if partitions is None:
            return ErrorCode.NONE, [(tp, offsets[tp]) for tp in sorted(offsets)]
        return ErrorCode.NONE, [(tp, offsets.get(tp)) for tp in partitions]

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Kafka's OffsetDelete: offsets of topics the group still consumes stay."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group.state is GroupState.EMPTY:
            results = dict.fromkeys(partitions, ErrorCode.NONE)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            results = {
                tp: (
                    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    if group.is_subscribed_to_topic(tp[0])
                    else ErrorCode.NONE
                )
                for tp in partitions
            }
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        self.store.delete_offsets(
            group_id, [tp for tp, e in results.items() if e is ErrorCode.NONE]
        )
        return ErrorCode.NONE, results

    # -- administration ---------------------------------------------------------------------
    def describe(self, group_id: str) -> GroupSummary:
        group = self.groups.get(group_id)
        if group is None:
            return GroupSummary(group_id, GroupState.DEAD.value, "", "", ())
        stable = group.state is GroupState.STABLE
        protocol = group.protocol_name or "" if stable else ""
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupSummary(
            group_id, group.state.value, group.protocol_type or "", protocol, members
        )

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[GroupOverview]:
        state_filter = {s.lower() for s in states}
        type_filter = {t.lower() for t in types}
        if type_filter and GROUP_TYPE_CLASSIC not in type_filter:
            return []
        return [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if g.state is not GroupState.DEAD
            and (not state_filter or g.state.value.lower() in state_filter)
        ]

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                self._remove_group(group)
                results[group_id] = ErrorCode.NONE
        return results

    def _remove_group(self, group: ClassicGroup) -> None:
        group.mark_dead()
        del self.groups[group.group_id]
        self._empty_since.pop(group.group_id, None)
        self.store.delete_group(group.group_id)

    def expire_offsets(self, wall_ms: int) -> int:
        """Kafka's offset retention (KIP-211); returns how many offsets expired.

        Empty groups lose their offsets `offsets.retention.minutes` after they
        became empty (or after the commit, if later); standalone consumers'
        offsets expire that long after their commit; a stable consumer group
        only loses offsets of topics it no longer subscribes to. Empty groups
        left without offsets are removed.
        """
        self._wall_ms = wall_ms
        retention = self.config.offsets_retention_ms
        expired_count = 0
        for group in list(self.groups.values()):
            offsets = self.store.group_offsets(group.group_id)
            expired: list[TopicPartition] = []
            if group.protocol_type and group.state is GroupState.EMPTY:
                since = self._empty_since.get(group.group_id, 0)
                expired = [
                    tp
                    for tp, om in offsets.items()
                    if max(since, om.commit_timestamp_ms) + retention <= wall_ms
                ]
            elif (
                group.protocol_type == CONSUMER_PROTOCOL_TYPE
                and group.state is GroupState.STABLE
                and group.subscribed_topics is not None
            ):
                topics = group.subscribed_topics
                expired = [
                    tp
                    for tp, om in offsets.items()
                    if tp[0] not in topics and om.commit_timestamp_ms + retention <= wall_ms
                ]
            elif not group.protocol_type:
                expired = [
                    tp
                    for tp, om in offsets.items()
                    if om.commit_timestamp_ms + retention <= wall_ms
                ]
            if expired:
                self.store.delete_offsets(group.group_id, expired)
                expired_count += len(expired)
            if (
                group.state is GroupState.EMPTY
                and not group.members
                and not group.pending_members
                and not self.store.has_offsets(group.group_id)
            ):
                self._remove_group(group)
        return expired_count

    def remove_empty_group(self, group_id: str) -> bool:
        """An empty classic group gives way to a consumer group of the same id (its
        committed offsets stay); False when it has members."""
        group = self.groups.get(group_id)
        if group is None:
            return True
        if group.state is not GroupState.EMPTY or group.members or group.pending_members:
            return False
        del self.groups[group_id]
        self._empty_since.pop(group_id, None)
        return True
