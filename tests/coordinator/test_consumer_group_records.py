"""A KIP-848 consumer group written as Kafka's records and replayed by the next
coordinator: from the journal, from `__consumer_offsets` (compacted or not), at any
point of any history, the replayed group is the group that was written, and its
members carry on heartbeating with their epochs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import trio
from hypothesis import settings
from hypothesis.stateful import invariant, rule

from broker.coordinator.consumer_group import ConsumerGroup, HeartbeatParams
from broker.coordinator.consumer_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    MEMBER_METADATA,
    group_records,
    load_consumer_group,
)
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import CoordinatorConfig, OffsetCommitItem
from broker.coordinator.group_metadata_partition import KeyedRecord
from broker.coordinator.offset_store import OffsetStore
from broker.coordinator.replicated_offset_store import ReplicatedOffsetStore
from broker.protocol.error_codes import ErrorCode
from tests.coordinator.test_consumer_group import CONFIG, TOPICS, Client, ConsumerGroupMachine
from tests.coordinator.test_replicated_offset_store import FakePartition, compacted


def assert_same_group(loaded: ConsumerGroup, live: ConsumerGroup) -> None:
    assert group_records(loaded) == group_records(live)
    assert loaded.owners == live.owners
    assert loaded.static_members == live.static_members
    assert set(loaded.session_deadlines) == set(live.session_deadlines) == set(live.members)
    assert set(loaded.rebalance_deadlines) == set(live.rebalance_deadlines)
    assert (loaded.state, loaded.assignor_name) == (live.state, live.assignor_name)


class ReplayedConsumerGroupMachine(ConsumerGroupMachine):
    """The consumer group machine (random joins, heartbeats, lost responses, leaves,
    resubscriptions, new partitions, timeouts), its records written after every step to
    a replicated store as the coordinator writes them; at any point a new coordinator
    may take over from those records, and the members carry on with it."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[KeyedRecord] = []
        self.store = ReplicatedOffsetStore(self.written.extend)

    @invariant()
    def the_records_replay_to_the_same_group(self) -> None:
        self.store.write_consumer_group("g", group_records(self.group))
        for records in (self.written, compacted(self.written)):
            loaded = ReplicatedOffsetStore(lambda _records: None)
            assert loaded.reset(records) == 0
            replayed = load_consumer_group(
                "g", loaded.consumer_group_records("g"), CONFIG, self.now
            )
            assert_same_group(replayed, self.group)

    @rule()
    def a_new_coordinator_takes_over(self) -> None:
        loaded = ReplicatedOffsetStore(lambda _records: None)
        loaded.reset(self.written)
        self.group = load_consumer_group("g", loaded.consumer_group_records("g"), CONFIG, self.now)


TestReplayedConsumerGroupMachine = ReplayedConsumerGroupMachine.TestCase
TestReplayedConsumerGroupMachine.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None
)


def settled_group() -> tuple[ConsumerGroup, list[Client]]:
    group = ConsumerGroup("g", CONFIG)
    clients = [Client("m1"), Client("m2", instance_id="static-2"), Client("m3", regex="o.*")]
    for _ in range(6):
        for client in clients:
            client.apply(group.heartbeat(client.params(full=True), 0.0, TOPICS))
    assert group.state == "Stable"
    return group, clients


def test_the_journal_keeps_the_group_across_a_restart_and_a_snapshot() -> None:
    group, _ = settled_group()
    with tempfile.TemporaryDirectory() as directory:
        store = OffsetStore(Path(directory))
        store.load()
        store.write_consumer_group("g", group_records(group))
        store.close()
        for snapshot in (False, True):
            reopened = OffsetStore(Path(directory))
            reopened.load()
            replayed = load_consumer_group("g", reopened.consumer_group_records("g"), CONFIG, 0.0)
            assert_same_group(replayed, group)
            if snapshot:
                reopened.snapshot()
            reopened.close()


def test_a_deleted_or_emptied_group_leaves_only_tombstones() -> None:
    group, clients = settled_group()
    written: list[KeyedRecord] = []
    store = ReplicatedOffsetStore(written.extend)
    store.write_consumer_group("g", group_records(group))
    store.commit("g", {})
    leaving = clients[0]
    group.heartbeat(HeartbeatParams(leaving.member_id, -1), 0.0, TOPICS)
    before = len(written)
    store.write_consumer_group("g", group_records(group))
    gone = {key for key, value in written[before:] if value is None}
    assert len(gone) == 3  # its assignment, target and metadata records
    assert all(leaving.member_id.encode() in key for key in gone)
    store.delete_group("g")
    assert compacted(written) == []
    assert store.consumer_group_records("g") == {}


def test_nothing_is_written_for_a_heartbeat_that_changes_nothing() -> None:
    group, clients = settled_group()
    written: list[KeyedRecord] = []
    store = ReplicatedOffsetStore(written.extend)
    store.write_consumer_group("g", group_records(group))
    before = len(written)
    for client in clients:
        client.apply(group.heartbeat(client.params(), 100.0, TOPICS))
    store.write_consumer_group("g", group_records(group))
    assert len(written) == before


def test_a_member_without_its_metadata_record_is_left_out_and_one_without_assignment_rejoins() -> (
    None
):
    group, clients = settled_group()
    records = dict(group_records(group))
    del records[(MEMBER_METADATA, "m1")]
    del records[(CURRENT_MEMBER_ASSIGNMENT, "m2")]
    replayed = load_consumer_group("g", records, CONFIG, 0.0)
    assert "m1" not in replayed.members
    m2 = clients[1]
    fenced = replayed.heartbeat(m2.params(), 0.0, TOPICS)
    assert fenced.error is ErrorCode.FENCED_MEMBER_EPOCH


def test_a_loaded_member_is_removed_only_when_silent_for_a_session_from_the_load() -> None:
    group, clients = settled_group()
    loaded_at = 50_000.0  # long after the members' last heartbeats
    replayed = load_consumer_group("g", group_records(group), CONFIG, loaded_at)
    assert replayed.on_timeout(loaded_at + CONFIG.session_timeout_ms - 1) == []
    for client in clients[1:]:
        beat = replayed.heartbeat(client.params(), loaded_at + 10, TOPICS)
        assert (beat.error, beat.member_epoch) == (ErrorCode.NONE, client.epoch)
    silent = replayed.on_timeout(loaded_at + CONFIG.session_timeout_ms)
    assert silent == [clients[0].member_id]
    assert set(replayed.members) == {c.member_id for c in clients[1:]}


async def test_a_group_whose_records_are_not_ours_is_skipped_and_the_others_load(
    tmp_path: Path,
) -> None:
    group, _ = settled_group()
    written: list[KeyedRecord] = []
    store = ReplicatedOffsetStore(written.extend)
    store.write_consumer_group("g", group_records(group))
    store.write_consumer_group("bad", {(MEMBER_METADATA, "m"): {"unexpected": 1}})
    async with trio.open_nursery() as nursery:
        service = await loaded_service(tmp_path / "c", FakePartition(written), nursery)
        assert set(service.consumer_groups.groups) == {"g"}
        nursery.cancel_scope.cancel()


def join_params(member_id: str, epoch: int = 0, **fields: Any) -> HeartbeatParams:
    return HeartbeatParams(
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",),
        owned=frozenset(),
        **fields,
    )


async def loaded_service(
    tmp_path: Path, partition: FakePartition, nursery: trio.Nursery
) -> GroupCoordinatorService:
    await trio.Path(tmp_path).mkdir()
    service = GroupCoordinatorService(CoordinatorConfig(), tmp_path, partition=partition)
    await nursery.start(service.run)
    partition.leadership.value = 1
    with trio.fail_after(5):
        while service.fetch_offsets("g", None)[0] is not ErrorCode.NONE:  # noqa: ASYNC110 - loading has no event of its own
            await trio.sleep(0.01)
    return service


async def test_members_keep_their_epochs_and_offsets_at_the_next_coordinator(
    tmp_path: Path,
) -> None:
    partition = FakePartition([])
    topics = {"t": 2}
    async with trio.open_nursery() as nursery:
        first = await loaded_service(tmp_path / "a", partition, nursery)
        joined = first.consumer_group_heartbeat("g", join_params("m1"), 1, topics)
        assert await first.stored() is ErrorCode.NONE
        assert (joined.error, joined.member_epoch) == (ErrorCode.NONE, 1)
        item = OffsetCommitItem(5, -1, "")
        committed = first.commit_offsets("g", 1, "m1", None, {("t", 0): item}, 9)
        assert await first.replicated(committed) == {("t", 0): ErrorCode.NONE}
        # The append of a later change fails: the heartbeat's answer must say so.
        partition.append_error = ErrorCode.NOT_ENOUGH_REPLICAS
        first.consumer_group_heartbeat("g", join_params("m2"), 1, topics)
        assert await first.stored() is ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition.append_error = ErrorCode.NONE
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        second = await loaded_service(tmp_path / "b", partition, nursery)
        beat = second.consumer_group_heartbeat(
            "g", HeartbeatParams("m1", 1, owned=frozenset({("t", 0), ("t", 1)})), 1, topics
        )
        assert (beat.error, beat.member_epoch) == (ErrorCode.NONE, 1)
        assert second.fetch_offsets("g", [("t", 0)], "m1", 1)[1][0][1] is not None
        assert second.fetch_offsets("g", [("t", 0)], "m1", 0)[0] is ErrorCode.STALE_MEMBER_EPOCH
        assert second.fetch_offsets("g", [("t", 0)], "m2", 1)[0] is ErrorCode.UNKNOWN_MEMBER_ID
        assert second.fetch_offsets("g", [("t", 0)], None, -1)[0] is ErrorCode.NONE
        nursery.cancel_scope.cancel()


async def test_a_restarted_broker_keeps_its_consumer_groups_in_the_journal(
    tmp_path: Path,
) -> None:
    for restart in (False, True):
        async with trio.open_nursery() as nursery:
            service = GroupCoordinatorService(CoordinatorConfig(), tmp_path)
            await nursery.start(service.run)
            if not restart:
                joined = service.consumer_group_heartbeat("g", join_params("m1"), 1, {"t": 1})
                assert joined.member_epoch == 1
            else:
                beat = service.consumer_group_heartbeat(
                    "g", HeartbeatParams("m1", 1, owned=frozenset({("t", 0)})), 1, {"t": 1}
                )
                assert (beat.error, beat.member_epoch) == (ErrorCode.NONE, 1)
                assert [g.group_type for g in service.list_groups()] == ["consumer"]
            nursery.cancel_scope.cancel()
