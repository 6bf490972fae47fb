"""A segment's aborted-transaction index: Kafka's `.txnindex`.

A read_committed consumer must learn which transactions in the range it fetched
were aborted, so that it can drop their records. Scanning the log for ABORT
markers on every fetch would be slow; instead each segment keeps, for every
transaction whose ABORT marker it holds, one entry (Kafka's AbortedTxn):
producer id, first offset of the transaction, offset of the marker and the
last stable offset once the marker was written.

On disk the entries are Kafka's 34-byte records (version int16 = 0, then the
four int64s), appended as markers are written. The index is small, so it is
also held in memory; a torn entry at the end (a crash mid-write) is cut off at
load and the log's recovery scan re-adds whatever is missing.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


@attrs.frozen(slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(
            _VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def parse_entries(data: bytes) -> list[AbortedTxn]:
    """Whole, well-formed entries at the start of ``data`` (stops at the first bad one)."""
    entries = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != _VERSION or first > last:
            break
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndex:
    """The `.txnindex` file of one segment and its entries in memory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._fd = -1

    def open(self) -> None:
        """Open (creating lazily: the file appears with the first entry) and load.
        Raises OSError."""
        self.entries = []
        with contextlib.suppress(FileNotFoundError):
            data = self.path.read_bytes()
            self.entries = parse_entries(data)
            if len(self.entries) * ENTRY_SIZE != len(data):
                self._rewrite()

    def _ensure_fd(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def append(self, entry: AbortedTxn) -> None:
        """Write one entry (page cache; fsynced with the segment). Raises OSError."""
        data = entry.to_bytes()
        fd = self._ensure_fd()
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {self.path}")
        self.entries.append(entry)

    def contains(self, producer_id: int, last_offset: int) -> bool:
        return any(
            e.producer_id == producer_id and e.last_offset == last_offset for e in self.entries
        )

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset`` (the log was cut there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def _rewrite(self) -> None:
        self.close()
        if not self.entries:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(e.to_bytes() for e in self.entries))
        os.replace(tmp, self.path)

    def collect(self, start_offset: int, upper_bound: int) -> Iterator[AbortedTxn]:
        """Entries of transactions overlapping [start_offset, upper_bound) (Kafka's
        TransactionIndex.collectAbortedTxns)."""
        for entry in self.entries:
            if entry.last_offset >= start_offset and entry.first_offset < upper_bound:
                yield entry

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def merge_unique(entries: Iterable[AbortedTxn]) -> tuple[AbortedTxn, ...]:
    """Entries ordered by first offset, each once."""
    return tuple(sorted(set(entries), key=lambda e: (e.first_offset, e.producer_id)))
