"""Offsets committed inside open transactions, held by the group coordinator.

Kafka's group coordinator keeps TxnOffsetCommit's offsets as pending records in
`__consumer_offsets`, keyed by producer id, until the transaction coordinator
writes a COMMIT or ABORT marker into that partition. The same happens here: the
group's own process holds them (so TxnOffsetCommit needs no call to the
transaction coordinator, which may be another process) until a WriteTxnMarkers
for the group's shard commits or drops them. They are journalled next to the
group's offsets (`pending-transactional-offsets.journal`): a restart between
TxnOffsetCommit and the marker keeps them, and re-sharding moves them with
their group (broker/cluster/group_shards.py). The journal is rewritten with what
is pending at load, and emptied when nothing is pending once it has grown past
1 MiB.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from broker.journal_records import decode_records, encode_record
from broker.log._files import fsync_dir

log = logging.getLogger(__name__)

PENDING_JOURNAL = "pending-transactional-offsets.journal"
TRUNCATE_AFTER_BYTES = 1024 * 1024
REMEMBERED_EPOCHS = 100_000
"""Producers whose last marker's epoch is remembered (in memory), oldest forgotten first."""

TopicPartition = tuple[str, int]
PendingOffset = tuple[int, int, str]  # offset, leader epoch, metadata
GroupOffsets = dict[str, dict[TopicPartition, PendingOffset]]


class PendingTransactionalOffsets:
    """Pending offsets by producer id, then group (blocking file I/O: `load`, `flush`
    and `close` belong in a worker thread; `add`/`complete` are page-cache appends)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / PENDING_JOURNAL
        self.by_producer: dict[int, GroupOffsets] = {}
        self.epochs: dict[int, int] = {}
        self._fd = -1
        self._dirty = False
        self._bytes = 0

    def load(self) -> None:
        """Replay the journal, rewrite it with what is still pending, open it."""
        if self.replay():
            self._rewrite()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._bytes = os.fstat(self._fd).st_size

    def replay(self) -> bool:
        """Read the journal into memory only (re-sharding); whether there was one."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        records, _ = decode_records(data)
        for record in records:
            try:
                self._apply(record)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("skipping a malformed pending offset record: %s", exc)
        return True

    def _apply(self, record: dict[str, Any]) -> None:
        producer_id = int(record["pid"])
        if record.get("done"):
            self.by_producer.pop(producer_id, None)
            self._remember_epoch(producer_id, int(record.get("epoch", -1)))
            return
        group = str(record["group"])
        offsets = {
            (str(t), int(p)): (int(o), int(e), str(m)) for t, p, o, e, m in record["offsets"]
        }
        self.by_producer.setdefault(producer_id, {}).setdefault(group, {}).update(offsets)
        self._remember_epoch(producer_id, int(record["epoch"]))

    def _remember_epoch(self, producer_id: int, epoch: int) -> None:
        self.epochs.pop(producer_id, None)  # re-inserted last: the most recent
        self.epochs[producer_id] = epoch
        if len(self.epochs) > REMEMBERED_EPOCHS:
            for old in list(self.epochs)[: len(self.epochs) - REMEMBERED_EPOCHS]:
                if old not in self.by_producer:
                    del self.epochs[old]

    def records(self) -> list[dict[str, Any]]:
        """The live state as journal records (also what re-sharding moves)."""
        return [
            {
                "pid": pid,
                "epoch": self.epochs.get(pid, 0),
                "group": group,
                "offsets": [[t, p, *value] for (t, p), value in sorted(offsets.items())],
            }
            for pid, groups in sorted(self.by_producer.items())
            for group, offsets in sorted(groups.items())
        ]

    def _rewrite(self) -> None:
        data = b"".join(encode_record(r) for r in self.records())
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.directory)

    def write_snapshot(self, records: list[dict[str, Any]]) -> None:
        """Re-sharding: make `records` this directory's whole pending state."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for record in records:
            self._apply(record)
        self._rewrite()

    def _append(self, record: dict[str, Any]) -> None:
        if self._fd < 0:
            raise OSError("the pending offsets journal is not open")
        data = encode_record(record)
        if os.write(self._fd, data) != len(data):
            raise OSError(f"short write to {self.path}")
        self._bytes += len(data)
        self._dirty = True

    def add(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, PendingOffset],
    ) -> bool:
        """Hold the offsets; False (nothing held) when a newer epoch of the producer
        held offsets or sent a marker here, i.e. this producer instance was fenced (a
        zombie's offsets would otherwise wait for a marker that never comes)."""
        if self.epochs.get(producer_id, producer_epoch) > producer_epoch:
            return False
        record = {
            "pid": producer_id,
            "epoch": producer_epoch,
            "group": group_id,
            "offsets": [[t, p, *value] for (t, p), value in sorted(offsets.items())],
        }
        self._append(record)
        self._apply(record)
        return True

    def offsets_of(self, producer_id: int) -> GroupOffsets:
        return self.by_producer.get(producer_id, {})

    def forget(self, producer_id: int, producer_epoch: int) -> None:
        """The producer's transaction ended here (after a commit made its offsets the
        groups' committed offsets); the marker's epoch fences older instances."""
        done = {"pid": producer_id, "done": True, "epoch": producer_epoch}
        if producer_id in self.by_producer:
            self._append(done)
        self._apply(done)
        if not self.by_producer and self._bytes > TRUNCATE_AFTER_BYTES:
            # Nothing is pending: the journal's whole content is dead. Emptying it is
            # right whenever it reaches the disk (the next appends follow it).
            os.ftruncate(self._fd, 0)
            self._bytes = 0
            self._dirty = True

    def pending_partitions(self, group_id: str) -> set[TopicPartition]:
        return {tp for groups in self.by_producer.values() for tp in groups.get(group_id, {})}

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty:
            self._dirty = False
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.fsync(fd)
            os.close(fd)
