"""Committed offsets survive a change of the process count (re-sharding at start-up)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from broker.cluster.group_shards import reshard_for_single_process, reshard_group_offsets
from broker.cluster.member import shard_dir
from broker.cluster.placement import coordinator_shard
from broker.coordinator.offset_store import GroupRecord, OffsetAndMetadata, OffsetStore

GROUPS = [f"group-{i}" for i in range(40)]


def offsets_of(group: str) -> dict[tuple[str, int], OffsetAndMetadata]:
    number = int(group.split("-")[1])
    return {
        ("orders", 0): OffsetAndMetadata(number * 10, 3, f"meta-{number}", 1000 + number),
        ("orders", 1): OffsetAndMetadata(number * 10 + 1),
    }


def write_single_process_offsets(log_dir: Path) -> None:
    store = OffsetStore(log_dir)
    store.load()
    for group in GROUPS:
        store.commit(group, offsets_of(group))
        store.set_group_record(group, GroupRecord("consumer", 500))
    store.close()  # journal only, no snapshot: the journal must be carried over too


def read(directory: Path) -> OffsetStore:
    store = OffsetStore(directory)
    store.load()
    store.close()
    return store


def test_offsets_move_from_one_process_to_shards_by_group_hash(tmp_path: Path) -> None:
    write_single_process_offsets(tmp_path)
    assert reshard_group_offsets(tmp_path, 3)
    for shard in range(3):
        store = read(shard_dir(tmp_path, shard))
        mine = {g for g in GROUPS if coordinator_shard(g, 3) == shard}
        assert store.groups() == mine
        for group in mine:
            assert store.group_offsets(group) == offsets_of(group)
            assert store.group_record(group) == GroupRecord("consumer", 500)
    assert read(tmp_path).groups() == set()  # the single-process journal is gone


def test_offsets_survive_three_then_two_then_one_process(tmp_path: Path) -> None:
    write_single_process_offsets(tmp_path)
    reshard_group_offsets(tmp_path, 3)
    # A commit made while three processes ran, on the shard that owns the group.
    newer = OffsetAndMetadata(999_999)
    owner = shard_dir(tmp_path, coordinator_shard("group-7", 3))
    store = OffsetStore(owner)
    store.load()
    store.commit("group-7", {("orders", 0): newer})
    store.close()
    reshard_group_offsets(tmp_path, 2)
    assert not shard_dir(tmp_path, 2).exists()
    reshard_group_offsets(tmp_path, 1)
    single = read(tmp_path)
    assert single.groups() == set(GROUPS)
    assert single.group_offsets("group-7")[("orders", 0)] == newer
    assert single.group_offsets("group-8") == offsets_of("group-8")
    assert not (tmp_path / "group-coordinator").exists()


def test_nothing_moves_when_the_layout_already_fits(tmp_path: Path) -> None:
    write_single_process_offsets(tmp_path)
    assert not reshard_group_offsets(tmp_path, 1)
    assert reshard_group_offsets(tmp_path, 4)
    assert not reshard_group_offsets(tmp_path, 4)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not reshard_group_offsets(empty, 1)
    assert not reshard_group_offsets(empty, 3)
    assert not reshard_group_offsets(tmp_path / "not-created-yet", 1)


def test_an_interrupted_reshard_is_cleaned_up_and_redone(tmp_path: Path) -> None:
    write_single_process_offsets(tmp_path)
    (tmp_path / "group-coordinator.new" / "shard-0").mkdir(parents=True)
    reshard_group_offsets(tmp_path, 2)
    assert not (tmp_path / "group-coordinator.new").exists()
    total = set().union(*(read(shard_dir(tmp_path, s)).groups() for s in range(2)))
    assert total == set(GROUPS)


def test_a_single_process_does_not_touch_the_shards_of_a_cluster_that_holds_the_dir(
    tmp_path: Path,
) -> None:
    write_single_process_offsets(tmp_path)
    reshard_group_offsets(tmp_path, 2)
    fd = os.open(tmp_path / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert not reshard_for_single_process(tmp_path)
        assert shard_dir(tmp_path, 1).exists()
    finally:
        os.close(fd)
    assert reshard_for_single_process(tmp_path)
    assert read(tmp_path).groups() == set(GROUPS)
