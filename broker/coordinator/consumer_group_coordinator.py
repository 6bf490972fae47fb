"""Every KIP-848 consumer group of this coordinator, sans-IO: request checks of
ConsumerGroupHeartbeat (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid), the
groups' timers in one heap (as the classic GroupCoordinator keeps them) and the
offset-commit checks for consumer groups. The classic groups live beside them in
`GroupCoordinator`; the service decides which one a group id belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.coordinator.consumer_group import (
    GROUP_TYPE_CONSUMER,
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatParams,
    HeartbeatResult,
)
from broker.coordinator.consumer_group_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from broker.coordinator.group_coordinator import GroupOverview
from broker.coordinator.group_deadlines import GroupDeadlines
from broker.protocol.error_codes import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"


def _invalid(params: HeartbeatParams, api_version: int) -> str | None:
    """Why the request is malformed (INVALID_REQUEST), or None."""
    if params.instance_id == "":
        return "InstanceId can't be empty."
    if params.rack_id == "":
        return "RackId can't be empty."
    epoch = params.member_epoch
    if epoch == 0:
        if api_version >= 1 and not params.member_id:
            return "MemberId can't be empty."
        if params.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if params.owned:
            return "TopicPartitions must be empty when (re-)joining."
        if params.subscribed_topic_names is None and params.subscribed_topic_regex is None:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif epoch > 0 or epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
        if not params.member_id:
            return "MemberId can't be empty."
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and params.instance_id is None:
            return "InstanceId can't be null."
    else:
        return f"MemberEpoch {epoch} is invalid."
    return None


class ConsumerGroupCoordinator:
    def __init__(self, config: ConsumerGroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self._deadlines = GroupDeadlines()

    def add_loaded(self, group: ConsumerGroup) -> None:
        """A group replayed from its records (a coordinator starting or taking over)."""
        self.groups[group.group_id] = group
        self._reschedule(group)

    def is_active(self, group_id: str) -> bool:
        """A consumer group with members (an empty one gives way to a classic group)."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # -- timers ---------------------------------------------------------------------------
    def _reschedule(self, group: ConsumerGroup) -> None:
        self._deadlines.schedule(group.group_id, group.next_deadline())

    def next_timer(self) -> float | None:
        return self._deadlines.next_deadline()

    def fire_timers(self, now: float) -> list[tuple[str, str]]:
        """Fence the members whose deadlines passed; (group, member) of each."""
        fenced: list[tuple[str, str]] = []
        for group_id in self._deadlines.pop_due(now):
            group = self.groups.get(group_id)
            if group is not None:
                fenced += [(group_id, m) for m in group.on_timeout(now)]
                self._reschedule(group)
        return fenced

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------
    def heartbeat(
        self,
        group_id: str,
        params: HeartbeatParams,
        api_version: int,
        now: float,
        topics: Mapping[str, int],
    ) -> HeartbeatResult:
        if not group_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        why = _invalid(params, api_version)
        if why is not None:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, why)
        if params.server_assignor is not None and params.server_assignor not in (
            self.config.assignors
        ):
            return HeartbeatResult(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {params.server_assignor} is not supported. Supported assignors:"
                f" {', '.join(self.config.assignors)}.",
            )
        group = self.groups.get(group_id)
        if group is None:
            if params.member_epoch != 0:
                # The group is gone (a coordinator restart): the member must join again.
                return HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"group {group_id} has no member {params.member_id}",
                    params.member_id,
                )
            group = self.groups[group_id] = ConsumerGroup(group_id, self.config)
        result = group.heartbeat(params, now, topics)
        self._reschedule(group)
        return result

    # -- administration ---------------------------------------------------------------------
    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[GroupOverview]:
        state_filter = {s.lower() for s in states}
        type_filter = {t.lower() for t in types}
        if type_filter and GROUP_TYPE_CONSUMER not in type_filter:
            return []
        return [
            GroupOverview(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state, GROUP_TYPE_CONSUMER)
            for g in self.groups.values()
            if not state_filter or g.state.lower() in state_filter
        ]

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        return ErrorCode.NONE

    def forget_empty(self, group_id: str) -> None:
        """An empty consumer group becomes a classic one (Kafka converts it on JoinGroup)."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]
