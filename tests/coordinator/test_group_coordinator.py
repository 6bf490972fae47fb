"""GroupCoordinator's offset-commit rules and what it keeps of a group across a restart."""

from __future__ import annotations

from pathlib import Path

from broker.coordinator.group_coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    OffsetCommitItem,
)
from broker.coordinator.group_state import GroupState
from broker.coordinator.member_metadata import JoinResult
from broker.coordinator.offset_store import OffsetStore
from broker.protocol.error_codes import ErrorCode
from tests.coordinator.helpers import Answers, params, subscription

CONFIG = CoordinatorConfig(initial_rebalance_delay_ms=0)


def open_coordinator(directory: Path, now: float = 0) -> GroupCoordinator:
    store = OffsetStore(directory)
    store.load()
    return GroupCoordinator(CONFIG, store, wall_ms=1_000, now=now)


def join_one_member(coordinator: GroupCoordinator, group: str, now: float = 0) -> JoinResult:
    """A member joins, the group completes its rebalance and the leader syncs its assignment."""
    answers = Answers()
    member_params = params(protocols=(("range", subscription("t")),))
    coordinator.join(group, member_params, now, 1_000, answers.join)
    member_id = answers.joins[-1].member_id
    joined = params(member_id=member_id, protocols=(("range", subscription("t")),))
    coordinator.join(group, joined, now, 1_000, answers.join)
    coordinator.fire_timers(now, 1_000)
    result = answers.joins[-1]
    assert result.error is ErrorCode.NONE
    coordinator.sync(
        group,
        member_id,
        None,
        result.generation_id,
        "consumer",
        "range",
        {member_id: b"assigned"},
        now,
        1_000,
        answers.sync,
    )
    assert answers.syncs[-1].error is ErrorCode.NONE
    return result


def test_a_transactional_commit_without_member_or_generation_passes_a_group_with_members(
    tmp_path: Path,
) -> None:
    """aiokafka's TxnOffsetCommit v0 names no member: Kafka accepts it in a live group."""
    coordinator = open_coordinator(tmp_path)
    join_one_member(coordinator, "g")
    assert coordinator.groups["g"].state is GroupState.STABLE
    assert coordinator.validate_transactional_commit("g", "", None, -1) is ErrorCode.NONE


def test_a_transactional_commit_is_not_refused_while_the_group_completes_a_rebalance(
    tmp_path: Path,
) -> None:
    coordinator = open_coordinator(tmp_path)
    answers = Answers()
    coordinator.join("g", params(), 0, 1_000, answers.join)
    member_id = answers.joins[-1].member_id
    coordinator.join("g", params(member_id=member_id), 0, 1_000, answers.join)
    coordinator.fire_timers(0, 1_000)
    generation = answers.joins[-1].generation_id
    assert coordinator.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert coordinator.validate_transactional_commit("g", member_id, None, generation) is (
        ErrorCode.NONE
    )
    assert coordinator.validate_transactional_commit("g", "", None, -1) is ErrorCode.NONE


def test_a_transactional_commit_that_names_a_member_is_still_checked(tmp_path: Path) -> None:
    coordinator = open_coordinator(tmp_path)
    result = join_one_member(coordinator, "g")
    generation = result.generation_id
    assert coordinator.validate_transactional_commit("g", "stranger", None, generation) is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert coordinator.validate_transactional_commit(
        "g", result.member_id, None, generation + 1
    ) is (ErrorCode.ILLEGAL_GENERATION)


def test_a_plain_commit_without_member_is_still_refused_in_a_group_with_members(
    tmp_path: Path,
) -> None:
    coordinator = open_coordinator(tmp_path)
    join_one_member(coordinator, "g")
    errors = coordinator.commit_offsets("g", -1, "", None, {("t", 0): OffsetCommitItem(1)}, 8, 0, 1)
    assert errors == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def restart(coordinator: GroupCoordinator, directory: Path, now: float) -> GroupCoordinator:
    coordinator.store.close()
    return open_coordinator(directory, now)


def test_members_carry_on_in_their_generation_after_the_coordinator_restarts(
    tmp_path: Path,
) -> None:
    before = open_coordinator(tmp_path)
    joined = join_one_member(before, "g")
    member = joined.member_id
    after = restart(before, tmp_path, now=5_000)
    group = after.groups["g"]
    assert group.state is GroupState.STABLE
    assert (group.generation_id, group.protocol_name, group.leader_id) == (
        joined.generation_id,
        "range",
        member,
    )
    assert group.subscribed_topics == {"t"}
    assert after.heartbeat("g", member, None, joined.generation_id, 5_000) is ErrorCode.NONE
    errors = after.commit_offsets(
        "g", joined.generation_id, member, None, {("t", 0): OffsetCommitItem(3)}, 8, 5_000, 1
    )
    assert errors == {("t", 0): ErrorCode.NONE}
    answers = Answers()
    after.sync("g", member, None, joined.generation_id, None, None, {}, 5_000, 1, answers.sync)
    assert answers.syncs[-1].error is ErrorCode.NONE
    assert answers.syncs[-1].assignment == b"assigned"
    assert after.describe("g").members[0].metadata == subscription("t")


def test_a_restored_member_that_stays_silent_leaves_after_a_fresh_session_timeout(
    tmp_path: Path,
) -> None:
    before = open_coordinator(tmp_path)
    join_one_member(before, "g", now=0)
    after = restart(before, tmp_path, now=100_000)
    session_ms = params().session_timeout_ms
    after.fire_timers(100_000 + session_ms - 1, 2_000)
    still = after.groups["g"].state
    after.fire_timers(100_000 + session_ms, 2_000)
    assert (still, after.groups["g"].state) == (GroupState.STABLE, GroupState.EMPTY)
    assert not after.groups["g"].members


def test_a_group_that_emptied_comes_back_empty_in_its_generation(tmp_path: Path) -> None:
    before = open_coordinator(tmp_path)
    joined = join_one_member(before, "g")
    before.leave("g", [(joined.member_id, None)], 0, 1_000)
    before.fire_timers(0, 1_000)
    generation = before.groups["g"].generation_id
    assert generation == joined.generation_id + 1
    after = restart(before, tmp_path, now=0)
    assert after.groups["g"].state is GroupState.EMPTY
    assert after.groups["g"].generation_id == generation
    assert after.heartbeat("g", joined.member_id, None, joined.generation_id, 0) is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
