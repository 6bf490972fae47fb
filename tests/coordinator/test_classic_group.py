"""The classic group state machine, driven directly (no network, no Trio)."""

from __future__ import annotations

from broker.coordinator.classic_group import NEW_MEMBER_JOIN_TIMEOUT_MS, ClassicGroup
from broker.coordinator.group_state import GroupState
from broker.protocol.error_codes import ErrorCode
from tests.coordinator.helpers import Answers, params, subscription


def make_group(delay_ms: int = 0) -> ClassicGroup:
    return ClassicGroup("g", delay_ms)


def settle(group: ClassicGroup, now: float) -> None:
    """Fire deadlines until none is due at `now`, as the coordinator's timer loop does."""
    for _ in range(100):
        deadline = group.next_deadline()
        if deadline is None or deadline > now:
            return
        group.on_timeout(now)
    raise AssertionError("deadlines keep firing")


def state_of(group: ClassicGroup) -> GroupState:
    """Read through a call: mypy keeps an `is` narrowing of `group.state` across method calls."""
    return group.state


def last_sync_error(answers: Answers) -> ErrorCode:
    """Read through a call, for the same reason as `state_of`."""
    return answers.syncs[-1].error


def join_new_member(group: ClassicGroup, now: float = 0, **kwargs: object) -> tuple[str, Answers]:
    """MEMBER_ID_REQUIRED, then the rejoin with the given id."""
    answers = Answers()
    group.join(params(**kwargs), now, answers.join)  # type: ignore[arg-type]
    assert answers.joins[-1].error is ErrorCode.MEMBER_ID_REQUIRED
    member_id = answers.joins[-1].member_id
    group.join(params(member_id=member_id, **kwargs), now, answers.join)  # type: ignore[arg-type]
    return member_id, answers


def test_a_new_member_is_asked_for_its_member_id_first() -> None:
    group = make_group()
    answers = Answers()
    group.join(params(), 0, answers.join)
    assert answers.joins[0].error is ErrorCode.MEMBER_ID_REQUIRED
    assert answers.joins[0].member_id.startswith("client-")
    assert group.state is GroupState.EMPTY
    assert answers.joins[0].member_id in group.pending_members


def test_old_clients_join_without_a_member_id_round_trip() -> None:
    group = make_group()
    answers = Answers()
    group.join(params(require_known_member_id=False), 0, answers.join)
    settle(group, 0)
    assert answers.joins[0].error is ErrorCode.NONE
    assert answers.joins[0].generation_id == 1


def test_first_member_becomes_leader_after_the_initial_delay() -> None:
    group = make_group(delay_ms=3000)
    member_id, answers = join_new_member(group)
    assert group.state is GroupState.PREPARING_REBALANCE
    group.on_timeout(2999)
    assert len(answers.joins) == 1
    group.on_timeout(3000)
    result = answers.joins[-1]
    assert result.error is ErrorCode.NONE
    assert result.leader == member_id
    assert result.generation_id == 1
    assert [m.member_id for m in result.members] == [member_id]
    assert state_of(group) is GroupState.COMPLETING_REBALANCE


def test_initial_delay_is_extended_while_new_members_arrive() -> None:
    group = make_group(delay_ms=1000)
    _, first = join_new_member(group, now=0)
    _, second = join_new_member(group, now=500)
    group.on_timeout(1000)
    assert len(first.joins) == 1, "a member joined during the delay: wait one delay more"
    group.on_timeout(2000)
    assert first.joins[-1].error is ErrorCode.NONE
    assert second.joins[-1].error is ErrorCode.NONE
    assert first.joins[-1].generation_id == second.joins[-1].generation_id == 1


def test_leader_assignment_is_relayed_to_waiting_followers() -> None:
    group = make_group()
    leader, leader_answers = join_new_member(group)
    settle(group, 0)
    leader_sync = Answers()
    group.sync(leader, None, 1, None, None, {leader: b"L"}, 0, leader_sync.sync)
    assert group.state is GroupState.STABLE
    follower, follower_answers = join_new_member(group, now=1)
    assert state_of(group) is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(leader, None, 1, 2) is ErrorCode.REBALANCE_IN_PROGRESS
    group.join(params(member_id=leader), 3, leader_answers.join)
    assert leader_answers.joins[-1].generation_id == 2
    assert len(leader_answers.joins[-1].members) == 2
    assert follower_answers.joins[-1].members == ()
    follower_sync = Answers()
    group.sync(follower, None, 2, None, None, {}, 4, follower_sync.sync)
    assert follower_sync.syncs == [], "the follower waits for the leader"
    group.sync(leader, None, 2, None, None, {leader: b"a", follower: b"b"}, 5, leader_sync.sync)
    assert follower_sync.syncs[-1].assignment == b"b"
    assert leader_sync.syncs[-1].assignment == b"a"
    assert group.state is GroupState.STABLE


def test_protocol_is_one_every_member_supports_preferring_the_leaders_order() -> None:
    group = make_group()
    both = (("cooperative-sticky", b""), ("range", b""))
    _, a = join_new_member(group, protocols=both)
    _, b = join_new_member(group, protocols=(("range", b""), ("cooperative-sticky", b"")))
    settle(group, 0)
    assert a.joins[-1].protocol_name == "cooperative-sticky"
    assert b.joins[-1].protocol_name == "cooperative-sticky"


def test_a_member_without_a_common_protocol_is_rejected() -> None:
    group = make_group()
    join_new_member(group, protocols=(("range", b""),))
    answers = Answers()
    group.join(params(protocols=(("roundrobin", b""),)), 0, answers.join)
    assert answers.joins[-1].error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    group.join(params(protocol_type="connect"), 0, answers.join)
    assert answers.joins[-1].error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_members_that_miss_the_session_timeout_are_removed() -> None:
    group = make_group()
    leader, _ = join_new_member(group, session_ms=6000)
    settle(group, 0)
    group.sync(leader, None, 1, None, None, {}, 0, Answers().sync)
    assert group.heartbeat(leader, None, 1, 5000) is ErrorCode.NONE
    group.on_timeout(10_999)
    assert leader in group.members
    group.on_timeout(11_000)
    assert leader not in group.members
    group.on_timeout(11_000 + 30_000)
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 2


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_removed() -> None:
    group = make_group()
    slow, _ = join_new_member(group, rebalance_ms=20_000, session_ms=60_000)
    settle(group, 0)
    group.sync(slow, None, 1, None, None, {}, 0, Answers().sync)
    fast, fast_answers = join_new_member(group, now=100, rebalance_ms=20_000)
    group.on_timeout(20_099)
    assert len(fast_answers.joins) == 1
    group.on_timeout(20_100)
    assert slow not in group.members
    assert fast_answers.joins[-1].leader == fast
    assert fast_answers.joins[-1].generation_id == 2


def test_a_new_member_that_never_rejoins_times_out() -> None:
    group = make_group()
    answers = Answers()
    group.join(params(), 0, answers.join)
    pending = answers.joins[0].member_id
    group.on_timeout(10_000)
    assert pending not in group.pending_members
    later = Answers()
    group.join(params(member_id=pending), 10_001, later.join)
    assert later.joins[-1].error is ErrorCode.UNKNOWN_MEMBER_ID
    assert NEW_MEMBER_JOIN_TIMEOUT_MS > 10_000


def test_heartbeat_errors_follow_kafka() -> None:
    group = make_group()
    member, _ = join_new_member(group)
    settle(group, 0)
    assert group.heartbeat("nobody", None, 1, 0) is ErrorCode.UNKNOWN_MEMBER_ID
    assert group.heartbeat(member, None, 7, 0) is ErrorCode.ILLEGAL_GENERATION
    assert group.heartbeat(member, None, 1, 0) is ErrorCode.NONE


def test_leaving_member_triggers_a_rebalance_and_its_pending_join_is_answered() -> None:
    group = make_group()
    a, _ = join_new_member(group)
    settle(group, 0)
    group.sync(a, None, 1, None, None, {}, 0, Answers().sync)
    b, b_answers = join_new_member(group)
    assert group.leave(b, None, 1) is ErrorCode.NONE
    assert b_answers.joins[-1].error is ErrorCode.UNKNOWN_MEMBER_ID
    assert group.leave(b, None, 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert group.state is GroupState.PREPARING_REBALANCE


def test_static_member_rejoining_gets_a_new_id_and_fences_the_old_one() -> None:
    group = make_group()
    answers = Answers()
    group.join(params(instance_id="i1"), 0, answers.join)
    settle(group, 0)
    old = answers.joins[-1].member_id
    assert old.startswith("i1-")
    group.sync(old, "i1", 1, None, None, {old: b"x"}, 0, Answers().sync)
    again = Answers()
    group.join(params(instance_id="i1"), 1, again.join)
    new = again.joins[-1].member_id
    assert new != old
    assert again.joins[-1].error is ErrorCode.NONE
    assert again.joins[-1].generation_id == 1, "stable group, same protocol: no rebalance"
    assert group.state is GroupState.STABLE
    assert group.heartbeat(old, "i1", 1, 2) is ErrorCode.FENCED_INSTANCE_ID
    assert group.heartbeat(new, "i1", 1, 2) is ErrorCode.NONE
    assert group.leave("wrong", "i1", 3) is ErrorCode.FENCED_INSTANCE_ID
    assert group.leave("", "i1", 3) is ErrorCode.NONE


def test_sync_errors_follow_kafka() -> None:
    group = make_group()
    member, _ = join_new_member(group)
    answers = Answers()
    group.sync(member, None, 0, None, None, {}, 0, answers.sync)
    assert last_sync_error(answers) is ErrorCode.REBALANCE_IN_PROGRESS
    settle(group, 0)
    group.sync(member, None, 5, None, None, {}, 0, answers.sync)
    assert last_sync_error(answers) is ErrorCode.ILLEGAL_GENERATION
    group.sync(member, None, 1, "connect", None, {}, 0, answers.sync)
    assert last_sync_error(answers) is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    group.sync("ghost", None, 1, None, None, {}, 0, answers.sync)
    assert last_sync_error(answers) is ErrorCode.UNKNOWN_MEMBER_ID


def test_members_that_do_not_sync_in_time_are_removed() -> None:
    group = make_group()
    a, _ = join_new_member(group, rebalance_ms=10_000, session_ms=60_000)
    b, _ = join_new_member(group, rebalance_ms=10_000, session_ms=60_000)
    settle(group, 0)
    follower_sync = Answers()
    group.sync(b, None, 1, None, None, {}, 1, follower_sync.sync)
    assert follower_sync.syncs == []
    group.on_timeout(10_000)
    assert a not in group.members, "the leader never sent the assignment"
    assert follower_sync.syncs[-1].error is ErrorCode.REBALANCE_IN_PROGRESS
    assert group.state is GroupState.PREPARING_REBALANCE


def test_subscribed_topics_come_from_the_consumer_protocol_metadata() -> None:
    group = make_group()
    join_new_member(group, protocols=(("range", subscription("orders", "pay")),))
    settle(group, 0)
    assert group.subscribed_topics == {"orders", "pay"}
    assert group.is_subscribed_to_topic("orders")
    assert not group.is_subscribed_to_topic("other")
