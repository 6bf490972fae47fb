"""The durable state of every transactional id: this broker's `__transaction_state`.

Kafka keeps one compacted record per transactional id in `__transaction_state`.
Here the same records go to an append-only journal in the root of the first log
dir (`transaction-state.journal`; in a cluster of processes, one per shard in
`transaction-coordinator/shard-<i>/`): each state change appends the whole metadata
of its id (`length:u32 crc32:u32 JSON`), a removal appends a tombstone; the
last record of an id wins. The write reaches the page cache before the client
is answered (what one replica with acks=all guarantees against a process crash);
fsyncs come from the service shortly after. When the journal has grown well past
the live state it is rewritten compactly (temporary file, fsync, rename), at
load and on the flush path. A torn record at the end is cut off at load.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from broker.journal_records import decode_records, encode_record
from broker.log._files import fsync_dir
from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_metadata import TransactionMetadata

log = logging.getLogger(__name__)

JOURNAL_NAME = "transaction-state.journal"
COMPACT_AFTER_BYTES = 4 * 1024 * 1024


class TransactionLog:
    """Journal of TransactionMetadata records (blocking file I/O: load, flush and
    compact belong in a worker thread; `write` is a small page-cache append)."""

    def __init__(self, directory: Path, compact_after_bytes: int = COMPACT_AFTER_BYTES) -> None:
        self.directory = directory
        self.path = directory / JOURNAL_NAME
        self.compact_after_bytes = compact_after_bytes
        self._fd = -1
        self._bytes = 0
        self._live_bytes = 0
        self._dirty = False
        self._since_snapshot: list[bytes] | None = None

    def load(self) -> dict[str, TransactionMetadata]:
        """Replay the journal (cutting a torn tail), compact it when mostly dead, open
        it for appends. Raises OSError; a record that does not parse is skipped."""
        self.directory.mkdir(parents=True, exist_ok=True)
        state: dict[str, TransactionMetadata] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        records, used = decode_records(data)
        for record in records:
            tid = str(record.get("id", ""))
            if record.get("dead"):
                state.pop(tid, None)
                continue
            try:
                state[tid] = TransactionMetadata.from_record(record)
            except (KeyError, TypeError, ValueError) as exc:
                log.error("skipping a malformed transaction state record for %r: %s", tid, exc)
        if used != len(data):
            log.warning("cutting %d bytes of a torn record off %s", len(data) - used, self.path)
        if used != len(data) or len(data) > self.compact_after_bytes:
            self._rewrite(state.values())
        self._open()
        return state

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._bytes = os.fstat(self._fd).st_size

    def _rewrite(self, entries: Any) -> None:
        data = b"".join(encode_record(m.to_record()) for m in entries)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.directory)
        self._live_bytes = len(data)

    def write_snapshot(self, entries: list[TransactionMetadata]) -> None:
        """Re-sharding (broker/cluster/transaction_shards.py): make `entries` the whole
        journal, durably, without opening it for appends."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._rewrite(entries)

    def write(self, metadata: TransactionMetadata) -> None:
        """Append the id's current state. Raises OSError (the caller answers an error)."""
        self._append(encode_record(metadata.to_record()))

    def write_removal(self, transactional_id: str) -> None:
        self._append(encode_record({"id": transactional_id, "dead": True}))

    async def stored(self) -> ErrorCode:
        """Once what was written so far is as durable as an answer needs: at once here
        (the page cache); the replicated log waits for the in-sync replicas."""
        return ErrorCode.NONE

    def _append(self, data: bytes) -> None:
        if self._fd < 0:
            raise OSError("the transaction log is not open")
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(f"short write to {self.path} ({written} of {len(data)})")
        self._bytes += len(data)
        self._dirty = True
        if self._since_snapshot is not None:
            self._since_snapshot.append(data)

    def needs_compaction(self) -> bool:
        return self._bytes > max(self.compact_after_bytes, 4 * self._live_bytes)

    def begin_compaction(self, entries: list[TransactionMetadata]) -> bytes:
        """The compacted journal as of now (event loop); appends from here on are
        also kept aside so `finish_compaction` can add them to the new file."""
        self._since_snapshot = []
        return b"".join(encode_record(m.to_record()) for m in entries)

    def write_compacted(self, data: bytes) -> None:
        """Write the compacted journal to a temporary file and fsync it (worker thread)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._live_bytes = len(data)

    def finish_compaction(self) -> None:
        """Append what was written meanwhile and swap the files (event loop: a small
        write and a rename; durable at the next flush)."""
        tail = b"".join(self._since_snapshot or [])
        self._since_snapshot = None
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("ab") as f:
            f.write(tail)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        os.replace(tmp, self.path)
        self._open()
        self._dirty = True

    def abandon_compaction(self) -> None:
        self._since_snapshot = None

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty:
            self._dirty = False
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.fsync(fd)
            os.close(fd)
