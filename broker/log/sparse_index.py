"""The shared machinery of Kafka's two sparse segment indexes.

Both indexes map a monotonically increasing key to a value with fixed-size,
big-endian entries in a file next to the segment. They are kept in memory as two
``array('q')`` columns (bisect works on them directly) and written through to the
file with one ``os.write`` per entry on an ``O_APPEND`` descriptor, instead of
Kafka's preallocated mmap: there is never a zero-filled tail to trim, the file is
consistent after a clean shutdown (and after a process crash, since every entry is
in the page cache once written), and a file that is inconsistent after a power loss
is detected by `check` and rebuilt from the log.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path


class CorruptIndexError(Exception):
    """The index file does not match its segment; the caller rebuilds it."""


class SparseIndex:
    """Append-only (key, value) entries with floor lookups.

    Subclasses define how an entry is laid out in the file (`_ENTRY`, `_encode`,
    `_decode`), because Kafka stores offsets relative to the segment's base offset.
    """

    _ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._keys: array[int] = array("q")
        self._values: array[int] = array("q")
        self._fd = -1

    # -- file layout hooks

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        raise NotImplementedError

    # -- lifecycle

    def load(self) -> None:
        """Read the entries from disk (a missing file is an empty index).

        Raises CorruptIndexError when the size is not a whole number of entries or
        keys do not increase; OSError when the file cannot be read.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        entry = self._ENTRY
        if len(data) % entry.size:
            raise CorruptIndexError(
                f"{self.path}: size {len(data)} is not a multiple of {entry.size}"
            )
        keys: array[int] = array("q")
        values: array[int] = array("q")
        for first, second in entry.iter_unpack(data):
            key, value = self._decode(first, second)
            if keys and key <= keys[-1]:
                raise CorruptIndexError(f"{self.path}: entries are not increasing")
            keys.append(key)
            values.append(value)
        self._keys, self._values = keys, values

    def open(self) -> None:
        """Open the write-through descriptor (creating the file). Raises OSError."""
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def rewrite(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole index (recovery's rebuild). Raises OSError."""
        self.close()
        data = b"".join(self._encode(k, v) for k, v in entries)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self._keys = array("q", (k for k, _ in entries))
        self._values = array("q", (v for _, v in entries))
        self.open()

    def flush(self) -> None:
        """fsync the file; OSError propagates (the caller reports a storage error)."""
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    # -- entries

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    def last_entry(self) -> tuple[int, int] | None:
        if not self._keys:
            return None
        return self._keys[-1], self._values[-1]

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._keys, self._values, strict=True))

    def append(self, key: int, value: int) -> None:
        """Add an entry whose key is above every existing key; write it through.

        Raises ValueError for a non-increasing key (a bug in the caller) and
        OSError when the write fails (the in-memory entry is then not added).
        """
        if self._keys and key <= self._keys[-1]:
            raise ValueError(f"{self.path}: key {key} is not above {self._keys[-1]}")
        if self._fd >= 0:
            os.write(self._fd, self._encode(key, value))
        self._keys.append(key)
        self._values.append(value)

    def floor(self, key: int) -> tuple[int, int] | None:
        """The entry with the largest key <= ``key``, or None."""
        i = bisect.bisect_right(self._keys, key)
        if i == 0:
            return None
        return self._keys[i - 1], self._values[i - 1]
