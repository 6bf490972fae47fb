"""Kafka's `.index`: relative offset int32 + physical position int32 per entry."""

from __future__ import annotations

import bisect
import struct

from broker.log.sparse_index import CorruptIndexError, SparseIndex


class OffsetIndex(SparseIndex):
    """Maps the last offset of a batch to the file position where that batch starts.

    One entry per ``index.interval.bytes`` of log, so a lookup is a bisect followed
    by a scan of at most one interval of batch headers.
    """

    _ENTRY = struct.Struct(">ii")

    def _encode(self, key: int, value: int) -> bytes:
        return self._ENTRY.pack(key - self.base_offset, value)

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        return first + self.base_offset, second

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) to start scanning from for ``offset``: the floor entry,
        else the segment's start."""
        entry = self.floor(offset)
        return entry if entry is not None else (self.base_offset, 0)

    def entry_after(self, position: int) -> tuple[int, int] | None:
        """The first (offset, position) entry past ``position``: where a scan can resume
        after a batch it cannot read (positions increase with offsets)."""
        i = bisect.bisect_right(self._values, position)
        return (self._keys[i], self._values[i]) if i < len(self._values) else None

    def check(self, log_size: int) -> None:
        """Cheap consistency check against the segment; raises CorruptIndexError."""
        last = self.last_entry()
        if last is not None:
            offset, position = last
            if offset < self.base_offset or position >= log_size or position < 0:
                raise CorruptIndexError(f"{self.path}: last entry {last} is outside the log")
        for position in self._values:
            if position >= log_size:
                raise CorruptIndexError(f"{self.path}: position {position} beyond the log")
