"""The Trio layer: deadlines fire on time (MockClock), offsets outlive the service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import CoordinatorConfig, OffsetCommitItem
from broker.coordinator.member_metadata import JoinResult, SyncResult
from broker.handlers.group_handlers import Pending
from broker.protocol.error_codes import ErrorCode
from tests.coordinator.helpers import params


@asynccontextmanager
async def running_service(directory: Path, **config: Any) -> AsyncIterator[GroupCoordinatorService]:
    service = GroupCoordinatorService(CoordinatorConfig(**config), directory)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        yield service
        nursery.cancel_scope.cancel()


async def join(service: GroupCoordinatorService, member_id: str = "", /, **kw: int) -> JoinResult:
    pending: Pending[JoinResult] = Pending()
    service.join("g", params(member_id=member_id, **kw), pending.set)  # type: ignore[arg-type]
    with trio.fail_after(600):
        await pending.event.wait()
    assert pending.value is not None
    return pending.value


async def join_as_new_member(service: GroupCoordinatorService, **kw: int) -> JoinResult:
    first = await join(service, **kw)
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    return await join(service, first.member_id, **kw)


async def test_first_join_is_answered_after_the_initial_rebalance_delay(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_service(tmp_path, initial_rebalance_delay_ms=3000) as service:
        start = trio.current_time()
        result = await join_as_new_member(service)
        assert result.error is ErrorCode.NONE
        assert 3.0 <= trio.current_time() - start < 3.1


async def test_a_zero_initial_delay_answers_the_join_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_service(tmp_path, initial_rebalance_delay_ms=0) as service:
        start = trio.current_time()
        result = await join_as_new_member(service)
        assert result.generation_id == 1
        assert trio.current_time() - start < 0.001


async def test_a_silent_member_is_removed_after_its_session_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_service(tmp_path, initial_rebalance_delay_ms=0) as service:
        result = await join_as_new_member(service, session_ms=6000)
        member = result.member_id
        synced: Pending[SyncResult] = Pending()
        service.sync("g", member, None, 1, None, None, {member: b"a"}, synced.set)
        assert synced.value is not None and synced.value.assignment == b"a"
        await trio.sleep(5)
        assert service.heartbeat("g", member, None, 1) is ErrorCode.NONE
        await trio.sleep(5.9)
        assert service.heartbeat("g", member, None, 1) is ErrorCode.NONE
        await trio.sleep(6.1)
        assert service.heartbeat("g", member, None, 1) is ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_rebalance_waits_for_members_until_the_rebalance_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_service(tmp_path, initial_rebalance_delay_ms=0) as service:
        first = await join_as_new_member(service, session_ms=60_000, rebalance_ms=20_000)
        service.sync("g", first.member_id, None, 1, None, None, {}, Pending[SyncResult]().set)
        start = trio.current_time()
        second = await join_as_new_member(service, session_ms=60_000, rebalance_ms=20_000)
        assert 20.0 <= trio.current_time() - start < 20.1
        assert second.generation_id == 2
        assert second.leader == second.member_id, "the silent first member was removed"


async def test_committed_offsets_survive_a_restart(tmp_path: Path) -> None:
    offsets = {("t", 0): OffsetCommitItem(42, 3, "m"), ("t", 1): OffsetCommitItem(7)}
    async with running_service(tmp_path) as service:
        results = service.commit_offsets("solo", -1, "", None, offsets, 8)
        assert set(results.values()) == {ErrorCode.NONE}
    async with running_service(tmp_path) as service:
        error, fetched = service.coordinator.fetch_offsets("solo", None)
        assert error is ErrorCode.NONE
        assert [(tp, om.offset if om else None) for tp, om in fetched] == [
            (("t", 0), 42),
            (("t", 1), 7),
        ]
        assert [g.group_id for g in service.coordinator.list_groups()] == ["solo"]


async def test_offsets_of_a_standalone_consumer_expire_after_retention(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_service(
        tmp_path, offsets_retention_ms=0, retention_check_interval_ms=1000
    ) as service:
        service.commit_offsets("solo", -1, "", None, {("t", 0): OffsetCommitItem(1)}, 8)
        assert [g.group_id for g in service.coordinator.list_groups()] == ["solo"]
        await trio.sleep(1.5)
        assert service.coordinator.list_groups() == []
        _, fetched = service.coordinator.fetch_offsets("solo", [("t", 0)])
        assert fetched == [(("t", 0), None)]
