"""Kafka's `.timeindex`: timestamp int64 + relative offset int32 per entry."""

from __future__ import annotations

import struct

from broker.log.sparse_index import CorruptIndexError, SparseIndex


class TimeIndex(SparseIndex):
    """Maps a timestamp to the offset of the batch where the segment's max timestamp
    first reached it; entries only when the max timestamp grows (Kafka's rule), so
    timestamps increase strictly and a floor lookup bounds a ListOffsets scan."""

    _ENTRY = struct.Struct(">qi")

    def _encode(self, key: int, value: int) -> bytes:
        return self._ENTRY.pack(key, value - self.base_offset)

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        return first, second + self.base_offset

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append unless the timestamp does not grow or the offset would go back."""
        last = self.last_entry()
        if last is not None and (timestamp <= last[0] or offset < last[1]):
            return
        self.append(timestamp, offset)

    def check(self, next_offset: int) -> None:
        """Raises CorruptIndexError when an entry points past the segment's end."""
        last = self.last_entry()
        if last is not None and not self.base_offset <= last[1] < max(
            next_offset, self.base_offset + 1
        ):
            raise CorruptIndexError(f"{self.path}: last entry {last} is outside the log")
