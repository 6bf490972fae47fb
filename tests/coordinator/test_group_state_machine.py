"""Random joins, syncs, heartbeats, leaves and timeouts against the group's invariants."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.coordinator.classic_group import ClassicGroup
from broker.coordinator.group_state import GroupState
from broker.coordinator.member_metadata import JoinResult, SyncResult
from broker.protocol.error_codes import ErrorCode
from tests.coordinator.helpers import params


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.group = ClassicGroup("g", 500)
        self.now = 0.0
        self.requests: list[list[JoinResult | SyncResult]] = []
        self.leader_of: dict[int, str] = {}
        self.assigned: dict[tuple[int, str], bytes] = {}
        self.generations: list[int] = [0]

    def _answer_slot(self) -> list[JoinResult | SyncResult]:
        slot: list[JoinResult | SyncResult] = []
        self.requests.append(slot)
        return slot

    def _settle(self) -> None:
        for _ in range(50):
            deadline = self.group.next_deadline()
            if deadline is None or deadline > self.now:
                break
            self.group.on_timeout(self.now)
        self.generations.append(self.group.generation_id)

    def _pick(self, data: st.DataObject) -> str:
        """A member by position: ids are random uuids, positions replay deterministically."""
        ids = list(self.group.members)
        return ids[data.draw(st.integers(min_value=0, max_value=len(ids) - 1))]

    @rule(session=st.sampled_from([6000, 10000]), rebalance=st.sampled_from([3000, 20000]))
    def new_member_joins(self, session: int, rebalance: int) -> None:
        slot = self._answer_slot()
        self.group.join(params(session_ms=session, rebalance_ms=rebalance), self.now, slot.append)
        first = slot[-1]
        assert isinstance(first, JoinResult)
        if first.error is ErrorCode.MEMBER_ID_REQUIRED:
            again = self._answer_slot()
            p = params(member_id=first.member_id, session_ms=session, rebalance_ms=rebalance)
            self.group.join(p, self.now, again.append)
        self._settle()

    @precondition(lambda self: bool(self.group.members))
    @rule(data=st.data())
    def member_rejoins(self, data: st.DataObject) -> None:
        member_id = self._pick(data)
        member = self.group.members[member_id]
        if member.is_awaiting_join:
            return
        slot = self._answer_slot()
        p = params(
            member_id=member_id,
            session_ms=member.session_timeout_ms,
            rebalance_ms=member.rebalance_timeout_ms,
        )
        self.group.join(p, self.now, slot.append)
        self._settle()

    @precondition(lambda self: bool(self.group.members))
    @rule(data=st.data())
    def member_syncs(self, data: st.DataObject) -> None:
        member_id = self._pick(data)
        member = self.group.members[member_id]
        if member.is_awaiting_sync or member.is_awaiting_join:
            return
        generation = self.group.generation_id
        assignments = {m: f"{generation}:{m}".encode() for m in self.group.members}
        slot = self._answer_slot()
        self.group.sync(member_id, None, generation, None, None, assignments, self.now, slot.append)
        self._settle()

    @precondition(lambda self: bool(self.group.members))
    @rule(data=st.data())
    def member_heartbeats(self, data: st.DataObject) -> None:
        member_id = self._pick(data)
        error = self.group.heartbeat(member_id, None, self.group.generation_id, self.now)
        assert error in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
        self._settle()

    @precondition(lambda self: bool(self.group.members))
    @rule(data=st.data())
    def member_leaves(self, data: st.DataObject) -> None:
        member_id = self._pick(data)
        assert self.group.leave(member_id, None, self.now) is ErrorCode.NONE
        self._settle()

    @rule(ms=st.integers(min_value=1, max_value=15000))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self._settle()

    @invariant()
    def every_request_is_answered_at_most_once(self) -> None:
        assert all(len(slot) <= 1 for slot in self.requests)

    @invariant()
    def one_leader_per_generation(self) -> None:
        for slot in self.requests:
            for result in slot:
                if isinstance(result, JoinResult) and result.error is ErrorCode.NONE:
                    leader = self.leader_of.setdefault(result.generation_id, result.leader)
                    assert leader == result.leader
                    if result.member_id == result.leader:
                        ids = {m.member_id for m in result.members}
                        assert result.leader in ids

    @invariant()
    def generation_grows_by_one_per_completed_rebalance(self) -> None:
        steps = [b - a for a, b in zip(self.generations, self.generations[1:], strict=False)]
        assert all(step in (0, 1) for step in steps)

    @invariant()
    def state_matches_membership(self) -> None:
        group = self.group
        if group.state is GroupState.EMPTY:
            assert not group.members
        if group.members:
            assert group.leader_id in group.members
        if group.state is GroupState.PREPARING_REBALANCE:
            assert group.join_deadline_ms is not None
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert not any(m.is_awaiting_join for m in group.members.values())
        if group.state is GroupState.STABLE:
            assert not any(m.is_awaiting_sync for m in group.members.values())
            generation = group.generation_id
            for member in group.members.values():
                assert member.assignment == f"{generation}:{member.member_id}".encode()

    @invariant()
    def successful_syncs_carry_the_leaders_assignment(self) -> None:
        for slot in self.requests:
            for result in slot:
                if isinstance(result, SyncResult) and result.error is ErrorCode.NONE:
                    generation, _, member_id = result.assignment.decode().partition(":")
                    assert member_id and int(generation) >= 1

    def teardown(self) -> None:
        # Rebalances always end: after long enough every JoinGroup has its answer.
        for _ in range(5):
            self.now += 400_000
            self._settle()
        joins_waiting = [m for m in self.group.members.values() if m.is_awaiting_join]
        assert not joins_waiting


TestGroupStateMachine = GroupMachine.TestCase
