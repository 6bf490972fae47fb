"""Group state kept in a replicated `__consumer_offsets` partition: what the records say
is what a new leader loads (compacted or not), and the coordinator answers only for the
partition it leads, once loaded, acknowledging commits once the append is replicated."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio
import trio.lowlevel
import trio_util
from hypothesis import given
from hypothesis import strategies as st

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import CoordinatorConfig, OffsetCommitItem
from broker.coordinator.group_metadata_partition import KeyedRecord
from broker.coordinator.member_metadata import JoinResult, SyncResult
from broker.coordinator.offset_store import GroupRecord, MemberRecord, OffsetAndMetadata
from broker.coordinator.replicated_offset_store import ReplicatedOffsetStore
from broker.coordinator.replicated_pending_offsets import ReplicatedPendingOffsets, is_pending_key
from broker.handlers.group_handlers import Pending
from broker.protocol.error_codes import ErrorCode
from tests.coordinator.helpers import params

GROUPS = st.sampled_from(["a", "b", "c"])
PARTITIONS = st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 2))
OFFSETS = st.builds(
    OffsetAndMetadata, st.integers(0, 1000), st.integers(-1, 3), st.text(max_size=5)
)
MEMBERS = st.builds(
    MemberRecord,
    st.text(max_size=4),
    st.none() | st.text(max_size=4),
    st.text(max_size=4),
    st.just("/127.0.0.1"),
    st.integers(1, 60_000),
    st.integers(1, 60_000),
    st.binary(max_size=8),
    st.binary(max_size=8),
)
GROUP_RECORDS = st.builds(
    GroupRecord,
    st.just("consumer"),
    st.none() | st.integers(0, 10**6),
    st.integers(0, 9),
    st.none() | st.just("range"),
    st.none() | st.text(max_size=4),
    st.lists(MEMBERS, max_size=2).map(tuple),
)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), GROUPS, st.dictionaries(PARTITIONS, OFFSETS, max_size=3)),
        st.tuples(st.just("delete"), GROUPS, st.lists(PARTITIONS, max_size=3)),
        st.tuples(st.just("forget"), GROUPS, st.none()),
        st.tuples(st.just("group"), GROUPS, GROUP_RECORDS),
    ),
    max_size=30,
)


def compacted(records: Sequence[KeyedRecord]) -> list[KeyedRecord]:
    """What the log cleaner leaves: the last value per key, tombstones gone."""
    last = {key: value for key, value in records}
    return [(key, value) for key, value in last.items() if value is not None]


@given(OPERATIONS)
def test_a_new_leader_loads_exactly_the_state_the_records_were_written_from(
    operations: list[tuple[str, str, object]],
) -> None:
    written: list[KeyedRecord] = []
    store = ReplicatedOffsetStore(written.extend)
    for kind, group, argument in operations:
        if kind == "commit":
            store.commit(group, argument)  # type: ignore[arg-type]
        elif kind == "delete":
            store.delete_offsets(group, argument)  # type: ignore[arg-type]
        elif kind == "forget":
            store.delete_group(group)
        else:
            store.set_group_record(group, argument)  # type: ignore[arg-type]
    for records in (written, compacted(written)):
        loaded = ReplicatedOffsetStore(lambda _records: None)
        assert loaded.reset(records) == 0
        assert loaded.state.offsets == {g: o for g, o in store.state.offsets.items() if o}
        assert loaded.state.groups == store.state.groups


def test_records_that_are_not_the_coordinators_are_skipped_on_load() -> None:
    loaded = ReplicatedOffsetStore(lambda _records: None)
    written: list[KeyedRecord] = []
    good = ReplicatedOffsetStore(written.extend)
    good.commit("g", {("t", 0): OffsetAndMetadata(4)})
    assert loaded.reset([(b"not json", b"x"), (b'["z"]', None), *written]) == 2
    assert loaded.group_offsets("g") == {("t", 0): OffsetAndMetadata(4)}


class FakePartition:
    """The partition as the coordinator sees it; appends answer `append_error`."""

    def __init__(self, records: list[KeyedRecord]) -> None:
        self.leadership: trio_util.AsyncValue[int | None] = trio_util.AsyncValue(None)
        self.records = records
        self.append_error = ErrorCode.NONE

    async def read_records(self) -> list[KeyedRecord]:
        await trio.lowlevel.checkpoint()
        return list(self.records)

    async def append(self, records: Sequence[KeyedRecord]) -> ErrorCode:
        await trio.lowlevel.checkpoint()
        if self.append_error is ErrorCode.NONE:
            self.records.extend(records)
        return self.append_error


def commit(service: GroupCoordinatorService, offset: int) -> dict[tuple[str, int], ErrorCode]:
    item = OffsetCommitItem(offset, -1, "")
    return service.commit_offsets("g", -1, "", None, {("t", 0): item}, 8)


async def test_the_coordinator_loads_when_it_leads_and_commits_once_replicated(
    tmp_path: Path,
) -> None:
    earlier: list[KeyedRecord] = []
    ReplicatedOffsetStore(earlier.extend).commit("g", {("t", 0): OffsetAndMetadata(3)})
    partition = FakePartition(earlier)
    config = CoordinatorConfig(initial_rebalance_delay_ms=60_000)
    service = GroupCoordinatorService(config, tmp_path, partition=partition)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        # Not leading: nothing loaded, the client is told to wait.
        error, _ = service.fetch_offsets("g", None)
        assert error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

        partition.leadership.value = 1
        with trio.fail_after(5):
            while service.fetch_offsets("g", None)[0] is not ErrorCode.NONE:  # noqa: ASYNC110 - loading has no event of its own
                await trio.sleep(0.01)
        assert service.fetch_offsets("g", None)[1] == [(("t", 0), OffsetAndMetadata(3))]

        results = await service.replicated(commit(service, 7))
        assert results == {("t", 0): ErrorCode.NONE}
        reloaded = ReplicatedOffsetStore(lambda _records: None)
        reloaded.reset(partition.records)
        assert reloaded.group_offsets("g")[("t", 0)].offset == 7

        partition.append_error = ErrorCode.NOT_ENOUGH_REPLICAS
        results = await service.replicated(commit(service, 8))
        assert results == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
        partition.append_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        results = await service.replicated(commit(service, 9))
        assert results == {("t", 0): ErrorCode.NOT_COORDINATOR}

        # A member waiting in a JoinGroup (the initial rebalance delay) when leadership
        # is lost is told to find the new coordinator.
        first: Pending[JoinResult] = Pending()
        service.join("g", params(), first.set)
        assert first.value is not None and first.value.error is ErrorCode.MEMBER_ID_REQUIRED
        waiting: Pending[JoinResult] = Pending()
        service.join("g", params(member_id=first.value.member_id), waiting.set)
        assert not waiting.event.is_set()

        # Leadership lost: the groups are forgotten until this broker leads again.
        partition.leadership.value = None
        with trio.fail_after(5):
            await waiting.event.wait()
        assert waiting.value is not None and waiting.value.error is ErrorCode.NOT_COORDINATOR
        with trio.fail_after(5):
            while service.fetch_offsets("g", None)[0] is ErrorCode.NONE:  # noqa: ASYNC110 - as above
                await trio.sleep(0.01)
        assert service.fetch_offsets("g", None)[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert service.store.group_offsets("g") == {}
        nursery.cancel_scope.cancel()


async def test_sync_group_is_answered_once_the_group_record_is_replicated(tmp_path: Path) -> None:
    partition = FakePartition([])
    config = CoordinatorConfig(initial_rebalance_delay_ms=0)
    service = GroupCoordinatorService(config, tmp_path, partition=partition)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        partition.leadership.value = 1
        with trio.fail_after(5):
            while service.fetch_offsets("g", None)[0] is not ErrorCode.NONE:  # noqa: ASYNC110 - loading has no event of its own
                await trio.sleep(0.01)
        for append_error, answered in (
            (ErrorCode.NONE, ErrorCode.NONE),
            (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        ):
            partition.append_error = append_error
            first: Pending[JoinResult] = Pending()
            service.join("g", params(), first.set)
            assert first.value is not None
            joined: Pending[JoinResult] = Pending()
            service.join("g", params(member_id=first.value.member_id), joined.set)
            with trio.fail_after(5):
                await joined.event.wait()
            assert joined.value is not None and joined.value.error is ErrorCode.NONE
            member, generation = joined.value.member_id, joined.value.generation_id
            synced: Pending[SyncResult] = Pending()
            service.sync("g", member, None, generation, None, None, {member: b"a"}, synced.set)
            assert not synced.event.is_set(), "answered before the group record was appended"
            with trio.fail_after(5):
                await synced.event.wait()
            assert synced.value is not None and synced.value.error is answered
            assert service.leave("g", [(member, None)])[0] is ErrorCode.NONE
        stored = ReplicatedOffsetStore(lambda _records: None)
        stored.reset(partition.records)
        record = stored.group_record("g")
        assert record is not None and record.generation_id >= 1
        nursery.cancel_scope.cancel()


def test_pending_transactional_offsets_load_back_and_a_marker_tombstones_them() -> None:
    sunk: list[KeyedRecord] = []
    pending = ReplicatedPendingOffsets(sunk.extend)
    assert pending.add("g", 7, 0, {("t", 0): (5, -1, "")})
    assert pending.add("g", 7, 0, {("t", 1): (9, -1, "m")})
    assert pending.add("h", 8, 2, {("t", 0): (3, -1, "")})
    reloaded = ReplicatedPendingOffsets(lambda records: None)
    compacted = list({key: (key, value) for key, value in sunk}.values())
    for records in (sunk, compacted):
        reloaded.reset(records)
        assert reloaded.by_producer == pending.by_producer
        assert reloaded.pending_partitions("g") == {("t", 0), ("t", 1)}
    assert all(is_pending_key(key) for key, _ in sunk)

    pending.forget(7, 0)
    reloaded.reset(sunk)
    assert reloaded.by_producer == {8: {"h": {("t", 0): (3, -1, "")}}}
