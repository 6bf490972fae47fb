"""Committed offsets survive restarts: journal replay, snapshots, torn records."""

from __future__ import annotations

import os
from pathlib import Path

from broker.coordinator.offset_store import (
    SNAPSHOT_NAME,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetStore,
)


def reopen(directory: Path) -> OffsetStore:
    store = OffsetStore(directory)
    store.load()
    return store


def journals(directory: Path) -> list[Path]:
    return sorted(directory.glob("coordinator-offsets.*.journal"))


def test_commits_are_replayed_after_a_restart(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    store.commit("g", {("t", 0): OffsetAndMetadata(5, 2, "meta", 1000)})
    store.commit("g", {("t", 0): OffsetAndMetadata(7, 2, "", 2000), ("t", 1): OffsetAndMetadata(1)})
    store.close()
    again = reopen(tmp_path)
    assert again.group_offsets("g") == {
        ("t", 0): OffsetAndMetadata(7, 2, "", 2000),
        ("t", 1): OffsetAndMetadata(1),
    }


def test_deletes_and_group_records_are_replayed(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    store.commit("a", {("t", 0): OffsetAndMetadata(1), ("t", 1): OffsetAndMetadata(2)})
    store.commit("b", {("t", 0): OffsetAndMetadata(3)})
    store.set_group_record("a", GroupRecord("consumer", 123))
    store.delete_offsets("a", [("t", 0)])
    store.delete_group("b")
    store.close()
    again = reopen(tmp_path)
    assert again.group_offsets("a") == {("t", 1): OffsetAndMetadata(2)}
    assert again.group_record("a") == GroupRecord("consumer", 123)
    assert again.groups() == {"a"}


def test_a_snapshot_replaces_the_journals_it_covers(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    for i in range(50):
        store.commit("g", {("t", i % 3): OffsetAndMetadata(i)})
    store.snapshot()
    store.commit("g", {("t", 0): OffsetAndMetadata(999)})
    store.close()
    assert (tmp_path / SNAPSHOT_NAME).exists()
    assert len(journals(tmp_path)) == 1
    again = reopen(tmp_path)
    assert again.group_offsets("g") == {
        ("t", 0): OffsetAndMetadata(999),
        ("t", 1): OffsetAndMetadata(49),
        ("t", 2): OffsetAndMetadata(47),
    }


def test_a_torn_last_record_is_cut_off_and_earlier_commits_survive(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    store.commit("g", {("t", 0): OffsetAndMetadata(10)})
    store.commit("g", {("t", 0): OffsetAndMetadata(20)})
    store.close()
    (journal,) = journals(tmp_path)
    data = journal.read_bytes()
    journal.write_bytes(data[:-3])
    again = reopen(tmp_path)
    assert again.group_offsets("g") == {("t", 0): OffsetAndMetadata(10)}
    again.commit("g", {("t", 1): OffsetAndMetadata(30)})
    again.close()
    third = reopen(tmp_path)
    assert third.group_offsets("g") == {
        ("t", 0): OffsetAndMetadata(10),
        ("t", 1): OffsetAndMetadata(30),
    }


def test_a_corrupt_last_record_is_ignored(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    store.commit("g", {("t", 0): OffsetAndMetadata(10)})
    store.commit("g", {("t", 0): OffsetAndMetadata(20)})
    store.close()
    (journal,) = journals(tmp_path)
    data = bytearray(journal.read_bytes())
    data[-2] ^= 0xFF
    journal.write_bytes(bytes(data))
    assert reopen(tmp_path).group_offsets("g") == {("t", 0): OffsetAndMetadata(10)}


def test_an_interrupted_snapshot_leaves_the_previous_state_readable(tmp_path: Path) -> None:
    store = reopen(tmp_path)
    store.commit("g", {("t", 0): OffsetAndMetadata(1)})
    data, fd, seq = store.begin_snapshot()
    store.commit("g", {("t", 0): OffsetAndMetadata(2)})
    # Crash before the snapshot was written: only a partial temporary file remains.
    (tmp_path / (SNAPSHOT_NAME + ".tmp")).write_bytes(data[: len(data) // 2])
    store.close()
    os.close(fd)
    assert seq == 1
    assert reopen(tmp_path).group_offsets("g") == {("t", 0): OffsetAndMetadata(2)}


def test_a_groups_generation_and_members_round_trip_through_journal_and_snapshot(
    tmp_path: Path,
) -> None:
    member = MemberRecord(
        "m-1", "instance-1", "client", "/127.0.0.1", 30_000, 10_000, b"\x00s", b""
    )
    other = MemberRecord("m-2", None, "client", "/127.0.0.1", 30_000, 10_000, b"", b"\x00\xffa")
    record = GroupRecord("consumer", None, 7, "range", "m-1", (member, other))
    store = reopen(tmp_path)
    store.set_group_record("g", record)
    store.close()
    assert reopen(tmp_path).group_record("g") == record
    again = reopen(tmp_path)
    again.snapshot()
    again.close()
    assert all(p.stat().st_size == 0 for p in journals(tmp_path))  # read from the snapshot
    assert reopen(tmp_path).group_record("g") == record
