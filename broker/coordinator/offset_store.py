"""Durable committed offsets: an append-only journal plus periodic atomic snapshots.

Why not an internal compacted `__consumer_offsets` topic: the log was being
built at the same time, and a single broker gains nothing from replaying its
offsets through the log. So offsets live in plain files in the root of the
first log dir (files, not directories, so a log-dir scan never mistakes them
for partitions). Hosts coordinated through ZooKeeper, whose state must survive
the host, keep the same records in a replicated `__consumer_offsets` partition
instead (`replicated_offset_store.py`):

- `coordinator-offsets.snapshot`: the whole state at some point, written to a
  temporary file, fsynced and renamed over the old one (atomic), naming the
  first journal that is *not* included in it;
- `coordinator-offsets.<n>.journal`: records appended after that point. Each
  record is `length:u32 crc32:u32 payload` with a JSON payload.

A commit is appended (a `write()` into the page cache) before it is
acknowledged, which is Kafka's own guarantee for a single broker (acks=-1 on
one replica survives a process crash; an fsync happens on the flush
interval and at shutdown). When the journal grows past a threshold, appends
switch to a new journal and a snapshot of the state at the switch is written
in a worker thread; journals it covers are then deleted. Recovery loads the
snapshot and replays the journals in order; a torn or corrupt record at the
end of the last journal (a crash mid-append) is cut off.

Record kinds: `c` commit offsets, `d` delete some offsets, `x` delete a group
(its offsets and its record), `g` a group's persistent facts (protocol type
and when it became empty, for retention and for listing after a restart; Kafka's
GroupMetadata record: generation, protocol, leader and members with their subscription
and assignment, written when a rebalance completes and when the group empties, so
members keep their generation across a restart of their coordinator); and Kafka's
records of a KIP-848 consumer group (`consumer_group_records.py`: `cgm`, `cgp`, `cgmm`,
`cgtm`, `cgta`, `cgca`, each a key's value or its tombstone).
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs

from broker.coordinator import consumer_group_records
from broker.coordinator.consumer_group_records import GroupRecords
from broker.journal_records import decode_records, encode_record

log = logging.getLogger(__name__)

SNAPSHOT_NAME = "coordinator-offsets.snapshot"
JOURNAL_PREFIX = "coordinator-offsets."
JOURNAL_SUFFIX = ".journal"

TopicPartition = tuple[str, int]


@attrs.frozen
class OffsetAndMetadata:
    """One committed offset, as Kafka keeps it."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0


@attrs.frozen
class MemberRecord:
    """One member as Kafka's GroupMetadataValue keeps it: the subscription is its
    metadata for the group's chosen protocol only."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@attrs.frozen
class GroupRecord:
    """What survives a restart about a group besides its offsets: Kafka's GroupMetadata
    record (generation, protocol, leader and members of the last completed rebalance, so
    members carry on with their generation after the coordinator restarts)."""

    protocol_type: str = ""
    empty_since_ms: int | None = None
    generation_id: int = 0
    protocol_name: str | None = None
    leader_id: str | None = None
    members: tuple[MemberRecord, ...] = ()


def _journal_name(seq: int) -> str:
    return f"{JOURNAL_PREFIX}{seq:08d}{JOURNAL_SUFFIX}"


class OffsetState:
    """The in-memory state: committed offsets and group records, per group."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.groups: dict[str, GroupRecord] = {}
        self.consumer_groups: dict[str, GroupRecords] = {}
        """KIP-848 groups: each record key's last value."""

    def apply(self, record: dict[str, Any]) -> None:
        kind = record.get("t")
        group = str(record.get("g", ""))
        if kind in consumer_group_records.KINDS:
            key = consumer_group_records.record_key(record)
            records = self.consumer_groups.setdefault(group, {})
            if record["v"] is None:
                records.pop(key, None)
            else:
                records[key] = dict(record["v"])
            if not records:
                del self.consumer_groups[group]
        elif kind == "c":
            offsets = self.offsets.setdefault(group, {})
            for topic, partition, offset, epoch, metadata, ts in record["o"]:
                offsets[(topic, partition)] = OffsetAndMetadata(offset, epoch, metadata, ts)
        elif kind == "d":
            offsets = self.offsets.get(group, {})
            for topic, partition in record["p"]:
                offsets.pop((topic, partition), None)
            if not offsets:
                self.offsets.pop(group, None)
        elif kind == "x":
            self.offsets.pop(group, None)
            self.groups.pop(group, None)
            self.consumer_groups.pop(group, None)
        elif kind == "g":
            self.groups[group] = GroupRecord(
                str(record.get("pt", "")),
                record.get("e"),
                int(record.get("gen", 0)),
                record.get("p"),
                record.get("l"),
                tuple(_member_from_json(m) for m in record.get("m", ())),
            )
        else:
            raise ValueError(f"unknown offset-store record kind {kind!r}")

    def to_records(self) -> Iterator[dict[str, Any]]:
        for group, rec in self.groups.items():
            yield _group_record(group, rec)
        for group, offsets in self.offsets.items():
            yield _commit_record(group, offsets.items())
        for group, records in self.consumer_groups.items():
            yield from consumer_group_records.changed_records(group, {}, records)


def _commit_record(
    group: str, offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata]]
) -> dict[str, Any]:
    return {
        "t": "c",
        "g": group,
        "o": [
            [tp[0], tp[1], om.offset, om.leader_epoch, om.metadata, om.commit_timestamp_ms]
            for tp, om in offsets
        ],
    }


def _group_record(group: str, rec: GroupRecord) -> dict[str, Any]:
    record: dict[str, Any] = {
        "t": "g",
        "g": group,
        "pt": rec.protocol_type,
        "e": rec.empty_since_ms,
    }
    if rec.generation_id:
        record["gen"] = rec.generation_id
    if rec.protocol_name is not None:
        record["p"] = rec.protocol_name
    if rec.leader_id is not None:
        record["l"] = rec.leader_id
    if rec.members:
        record["m"] = [_member_to_json(m) for m in rec.members]
    return record


def _member_to_json(m: MemberRecord) -> list[Any]:
    return [
        m.member_id,
        m.group_instance_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        m.session_timeout_ms,
        base64.b64encode(m.subscription).decode(),
        base64.b64encode(m.assignment).decode(),
    ]


def _member_from_json(fields: list[Any]) -> MemberRecord:
    member_id, instance_id, client_id, host, rebalance_ms, session_ms, sub, assignment = fields
    return MemberRecord(
        str(member_id),
        instance_id,
        str(client_id),
        str(host),
        int(rebalance_ms),
        int(session_ms),
        base64.b64decode(sub),
        base64.b64decode(assignment),
    )


class OffsetStore:
    """Committed offsets of every group, durable in `directory`.

    Mutations update memory and append to the journal synchronously (small
    writes into the page cache); `flush()` and `snapshot()` do the slow parts
    (fsync, rewriting the snapshot) and are meant for a worker thread. The
    Trio side calls `begin_snapshot()` first, on its own thread, so that the
    captured state and the journal switch happen at one instant.
    """

    def __init__(self, directory: Path, snapshot_after_bytes: int = 16 * 1024 * 1024) -> None:
        self.directory = directory
        self.snapshot_after_bytes = snapshot_after_bytes
        self.state = OffsetState()
        self._seq = 1
        self._fd: int | None = None
        self._journal_bytes = 0
        self._dirty = False

    # -- start-up ------------------------------------------------------------
    def load(self) -> None:
        """Read the snapshot and replay the journals; open the journal for appends."""
        self.directory.mkdir(parents=True, exist_ok=True)
        first_journal = 1
        snapshot = self.directory / SNAPSHOT_NAME
        if snapshot.exists():
            data = snapshot.read_bytes()
            records, used = decode_records(data)
            if used != len(data) or not records or records[0].get("t") != "s":
                raise RuntimeError(f"offset snapshot {snapshot} is corrupt")
            first_journal = int(records[0]["next"])
            for record in records[1:]:
                self.state.apply(record)
        journals = sorted(
            seq for seq in (self._journal_seq(p) for p in self.directory.iterdir()) if seq
        )
        for seq in journals:
            if seq < first_journal:
                (self.directory / _journal_name(seq)).unlink(missing_ok=True)
        live = [seq for seq in journals if seq >= first_journal]
        for index, seq in enumerate(live):
            path = self.directory / _journal_name(seq)
            data = path.read_bytes()
            records, used = decode_records(data)
            for record in records:
                self.state.apply(record)
            if used != len(data):
                if index == len(live) - 1:
                    log.warning(
                        "cutting %d bytes of a torn record off the end of %s",
                        len(data) - used,
                        path,
                    )
                    with path.open("r+b") as f:
                        f.truncate(used)
                        os.fsync(f.fileno())
                else:
                    log.error(
                        "offset journal %s is corrupt after byte %d; skipping the rest", path, used
                    )
        self._seq = live[-1] if live else first_journal
        self._open_journal()

    @staticmethod
    def _journal_seq(path: Path) -> int:
        name = path.name
        if not (name.startswith(JOURNAL_PREFIX) and name.endswith(JOURNAL_SUFFIX)):
            return 0
        middle = name[len(JOURNAL_PREFIX) : -len(JOURNAL_SUFFIX)]
        return int(middle) if middle.isdigit() else 0

    def _open_journal(self) -> None:
        path = self.directory / _journal_name(self._seq)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._journal_bytes = os.fstat(self._fd).st_size

    # -- reads ----------------------------------------------------------------
    def group_offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.state.offsets.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self.state.offsets.get(group))

    def group_record(self, group: str) -> GroupRecord | None:
        return self.state.groups.get(group)

    def groups(self) -> set[str]:
        """Groups with offsets or a classic GroupMetadata record."""
        return set(self.state.offsets) | set(self.state.groups)

    def consumer_group_records(self, group: str) -> GroupRecords:
        """The KIP-848 group's records as last written (empty: none)."""
        return self.state.consumer_groups.get(group, {})

    # -- mutations --------------------------------------------------------------
    def commit(self, group: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if offsets:
            self._append(_commit_record(group, offsets.items()))

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        parts = [[t, p] for t, p in partitions if (t, p) in self.group_offsets(group)]
        if parts:
            self._append({"t": "d", "g": group, "p": parts})

    def delete_group(self, group: str) -> None:
        state = self.state
        if group in state.offsets or group in state.groups or group in state.consumer_groups:
            self._append({"t": "x", "g": group})

    def set_group_record(self, group: str, record: GroupRecord) -> None:
        if self.state.groups.get(group) != record:
            self._append(_group_record(group, record))

    def write_consumer_group(self, group: str, records: GroupRecords) -> None:
        """Record what changed in a KIP-848 group since its records were last written
        (`records` empty: the group is gone, every record gets its tombstone)."""
        written = self.consumer_group_records(group)
        for record in consumer_group_records.changed_records(group, written, records):
            self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        self.state.apply(record)
        if self._fd is None:
            raise RuntimeError("the offset store is not open")
        frame = encode_record(record)
        written = os.write(self._fd, frame)
        if written != len(frame):
            raise OSError(f"short write to the offset journal ({written} of {len(frame)})")
        self._journal_bytes += len(frame)
        self._dirty = True

    # -- durability -------------------------------------------------------------
    def needs_snapshot(self) -> bool:
        return self._journal_bytes >= self.snapshot_after_bytes

    def flush(self) -> None:
        """fsync the journal (blocking: run in a worker thread)."""
        fd = self._fd
        if fd is not None and self._dirty:
            self._dirty = False
            os.fsync(fd)

    def begin_snapshot(self) -> tuple[bytes, int, int]:
        """Capture the state and switch appends to a new journal (fast, on the caller's thread).

        Returns the snapshot bytes, the old journal's fd and sequence number
        for `write_snapshot`, which does the slow part.
        """
        data = bytearray(encode_record({"t": "s", "next": self._seq + 1}))
        for record in self.state.to_records():
            data += encode_record(record)
        old_fd, old_seq = self._fd, self._seq
        if old_fd is None:
            raise RuntimeError("the offset store is not open")
        self._seq += 1
        self._dirty = False
        self._open_journal()
        return bytes(data), old_fd, old_seq

    def write_snapshot(self, data: bytes, old_fd: int, old_seq: int) -> None:
        """Write the snapshot atomically and drop the journals it covers (blocking)."""
        os.fsync(old_fd)
        os.close(old_fd)
        tmp = self.directory / (SNAPSHOT_NAME + ".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / SNAPSHOT_NAME)
        _fsync_dir(self.directory)
        for seq in range(old_seq, 0, -1):
            path = self.directory / _journal_name(seq)
            if not path.exists():
                break
            path.unlink()

    def snapshot(self) -> None:
        """Both halves at once (for shutdown and tests)."""
        self.write_snapshot(*self.begin_snapshot())

    def close(self) -> None:
        """fsync and close the journal (blocking)."""
        fd = self._fd
        if fd is not None:
            self._fd = None
            os.fsync(fd)
            os.close(fd)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
