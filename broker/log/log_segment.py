"""One segment of a partition's log: `<base>.log` plus its two sparse indexes.

File handling: the `.log` file is opened once with ``O_RDWR | O_APPEND`` and kept
open for the segment's life. Appends are ``os.write`` calls on that descriptor
(page-cache writes, fast enough for the event loop); reads are ``os.pread`` at
explicit positions, which never move a file pointer and so are
safe from worker threads concurrently with appends. fsync happens only in
`flush`, which callers run in a worker thread.

A segment that retention deletes while a threaded read still uses it is unlinked
at once, but its descriptors close only when the last reader releases it
(`acquire` / `release`), so a read in flight never sees a closed descriptor.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from broker.log.batch_framing import CorruptBatchError, framing_problem, resync_position
from broker.log.offset_index import OffsetIndex
from broker.log.sparse_index import CorruptIndexError
from broker.log.time_index import TimeIndex
from broker.log.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex
from broker.protocol.record_batch.batch_checks import read_batch_header
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchHeader,
    batch_length_at,
    parse_header,
)
from broker.protocol.record_batch.record_sinks import iter_records

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
INT32_MAX = 2**31 - 1
_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
_PROBE = [bytearray(1)]
"""in_page_cache's one-byte reads land here (called on the event loop only)."""
_RECOVERY_CHUNK = 1 << 20
_SCAN_CHUNK = 16 << 10
# Kafka's segment.index.bytes default (10 MiB): entries before the segment rolls.
DEFAULT_INDEX_BYTES = 10 * 1024 * 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's names: the base offset zero-padded to 20 digits."""
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A `.log` file with its offset and time indexes and the summary the log needs
    (size, next offset, max timestamp) without rereading the file."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        created_ms: int,
        max_index_entries: int | None = None,
        file_suffix: str = "",
    ) -> None:
        # file_suffix: the log cleaner writes a segment's replacement as `.cleaned` files.
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        entries = max_index_entries or DEFAULT_INDEX_BYTES // 8
        self.offset_index = OffsetIndex(
            directory / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix),
            base_offset,
            entries,
        )
        self.time_index = TimeIndex(
            directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix),
            base_offset,
            max_index_entries or DEFAULT_INDEX_BYTES // 12,
        )
        self.txn_index = TransactionIndex(
            directory / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + file_suffix)
        )
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        self.created_ms = created_ms
        self._bytes_since_index = 0
        self._fd = -1
        self._readers = 0
        self._deleted = False

    # ------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Open (creating) the log and index files for appending. Raises OSError;
        nothing stays open when it does."""
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self.offset_index.open()
            self.time_index.open()
            self.txn_index.open()
        except BaseException:
            self.close()
            raise
        self.size = os.fstat(self._fd).st_size

    def load_clean(self) -> None:
        """Open after a clean shutdown: trust the files, check them cheaply.

        The indexes are read and sanity-checked; the next offset of the active
        segment comes from scanning headers after the last index entry (at most
        one index interval). Raises CorruptIndexError when an index does not fit
        the log (the caller then runs `recover`), OSError on I/O failure.
        """
        indexes_exist = self.offset_index.path.exists() and self.time_index.path.exists()
        self.open()
        self.offset_index.load()
        self.offset_index.check(self.size if self.size else 1)
        self.time_index.load()
        if self.size and not indexes_exist:
            raise CorruptIndexError(f"{self.log_path}: an index file is missing")
        last_ts = self.time_index.last_entry()
        if last_ts is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_ts
        if self.size == 0:
            return
        first = self._read_header(0)
        self.first_batch_timestamp = first.max_timestamp
        self.next_offset = first.last_offset + 1
        start = self.offset_index.lookup(2**62)[1]
        end = start
        for pos, header in self.iter_headers(start):
            end = pos + header.size_in_bytes
            self.next_offset = header.last_offset + 1
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        if end != self.size:
            raise CorruptIndexError(f"{self.log_path}: batches end at {end}, file at {self.size}")
        self.time_index.check(self.next_offset)
        self._bytes_since_index = self.size - start

    def recover(
        self, expected_offset: int | None, visit: Callable[[RecordBatchHeader], None] | None = None
    ) -> int:
        """Validate every batch (framing, CRC, increasing offsets), rebuild both
        indexes and truncate the file after the last valid batch.

        Returns the number of bytes truncated away. ``visit`` sees each valid
        header (producer-state rebuild). Raises OSError on I/O failure. Runs in a
        worker thread: it reads the whole segment.
        """
        if self._fd < 0:
            self.open()
        size = os.fstat(self._fd).st_size
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self.next_offset = self.base_offset
        next_expected = max(expected_offset or 0, self.base_offset)
        since_index = 0
        pos = 0
        chunk = b""
        chunk_pos = 0
        valid_end = 0
        while pos < size:
            rel = pos - chunk_pos
            if rel + LOG_OVERHEAD > len(chunk):
                chunk = os.pread(self._fd, max(_RECOVERY_CHUNK, LOG_OVERHEAD), pos)
                chunk_pos, rel = pos, 0
                if len(chunk) < LOG_OVERHEAD:
                    break
            batch_length = batch_length_at(chunk, rel)
            batch_size = batch_length + LOG_OVERHEAD
            if batch_size < BATCH_HEADER_SIZE or pos + batch_size > size:
                break
            if rel + batch_size > len(chunk):
                chunk = os.pread(self._fd, max(_RECOVERY_CHUNK, batch_size), pos)
                chunk_pos, rel = pos, 0
                if len(chunk) < batch_size:
                    break
            try:
                header = read_batch_header(chunk, rel, verify_crc=True)
            except InvalidRecordsError:
                break
            if header.base_offset < next_expected or header.last_offset < header.base_offset:
                break
            if header.last_offset - self.base_offset > INT32_MAX:
                break
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = header.max_timestamp
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if since_index > self.index_interval_bytes:
                offset_entries.append((header.last_offset, pos))
                if not time_entries or self.max_timestamp > time_entries[-1][0]:
                    time_entries.append((self.max_timestamp, self.offset_of_max_timestamp))
                since_index = 0
            since_index += batch_size
            if visit is not None:
                visit(header)
            next_expected = header.last_offset + 1
            self.next_offset = next_expected
            pos += batch_size
            valid_end = pos
        truncated = size - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
        self.size = valid_end
        self._bytes_since_index = since_index
        self.offset_index.rewrite(offset_entries)
        self.time_index.rewrite(time_entries)
        self.txn_index.truncate_to(self.next_offset)
        return truncated

    def truncate_to(self, offset: int, *, corrupt: bool = False) -> int:
        """Cut the batch holding ``offset`` and everything after it, with the entries of
        all three indexes past the cut (Kafka's LogSegment.truncateTo); returns the bytes
        removed. The indexes and summary are rebuilt by `recover` from what remains, so
        a crash midway leaves a segment the next load recovers the same way. Worker
        thread: it reads the remaining segment once. Raises OSError.

        ``corrupt``: the segment holds a corrupt batch at or below ``offset`` (a follower
        cutting its log below one, docs/corrupt-data.md); the recovery then runs even
        when ``offset`` is not found, and cuts at the first batch failing framing or
        CRC, wherever the damaged header made the segment's summary end."""
        try:
            found = self.find_batch_checked(offset)
            position = None if found is None else found[0]
        except CorruptBatchError as exc:
            position = exc.position
        if position is None:
            if not corrupt:
                return 0
            position = self.size
        os.ftruncate(self._fd, position)
        removed = self.size - position
        return removed + self.recover(None)

    def find_corruption(self) -> tuple[int, int] | None:
        """(position, offset) of the first batch failing framing or CRC, or None.

        Reads the whole segment without changing it (worker thread). Used at start-up on
        the active segment after a clean shutdown, which is otherwise trusted: appending
        after a corrupt batch would put new data where a later recovery truncates it.
        """
        if self._fd < 0:
            self.open()
        pos = 0
        expected = self.base_offset
        while pos < self.size:
            head = os.pread(self._fd, LOG_OVERHEAD, pos)
            if len(head) < LOG_OVERHEAD:
                return pos, expected
            batch_length = batch_length_at(head)
            batch_size = batch_length + LOG_OVERHEAD
            if batch_size < BATCH_HEADER_SIZE or pos + batch_size > self.size:
                return pos, expected
            batch = os.pread(self._fd, batch_size, pos)
            try:
                header = read_batch_header(batch, 0, verify_crc=True)
            except InvalidRecordsError:
                return pos, expected
            if len(batch) < batch_size or header.base_offset < expected:
                return pos, expected
            expected = header.last_offset + 1
            pos += batch_size
        return None

    def flush(self) -> None:
        """fsync log and indexes (worker thread). OSError propagates."""
        if self._fd >= 0:
            os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Close descriptors (never raises for an already closed segment)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index (Kafka does this at
        roll and close) so a clean load finds the segment's max timestamp there."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def acquire(self) -> None:
        self._readers += 1

    def release(self) -> None:
        self._readers -= 1
        if self._deleted and self._readers == 0:
            self.close()

    def mark_deleted(self) -> None:
        """Stop using the segment (event loop): descriptors close now, or when the
        last threaded reader releases it."""
        self._deleted = True
        if self._readers == 0:
            self.close()

    def unlink_files(self) -> None:
        """Remove the files (worker thread; an open descriptor keeps the data
        readable until closed). Missing files are ignored; other OSErrors propagate."""
        paths = (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path)
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # ------------------------------------------------------------ writing

    def can_hold(self, header: RecordBatchHeader, size: int, segment_bytes: int) -> bool:
        """Whether the batch (with offsets assigned) may go into this segment."""
        if self.size == 0:
            return header.last_offset - self.base_offset <= INT32_MAX
        return (
            self.size + size <= segment_bytes
            and header.last_offset - self.base_offset <= INT32_MAX
            and not self.offset_index.is_full
            and not self.time_index.is_full
        )

    def append(
        self,
        data: bytes | bytearray | memoryview,
        header: RecordBatchHeader,
        rest: bytes | bytearray | memoryview = b"",
    ) -> int:
        """Write one batch whose offsets are already assigned (``data``, then ``rest``:
        a leader writes its patched header and the request's records with one writev,
        no copy of the batch); returns its position.

        Adds index entries per ``index.interval.bytes`` the way Kafka does. On a
        short or failed write the file is truncated back to the old size so the
        segment never holds a partial batch that was not reported; OSError then
        propagates.
        """
        position = self.size
        self.write(data, rest)
        self.appended(header, position, len(data) + len(rest))
        return position

    def write(
        self, data: bytes | bytearray | memoryview, rest: bytes | bytearray | memoryview = b""
    ) -> None:
        """The file part of `append` (a worker thread may run it for a large batch while
        the caller holds its log's append lock; `appended` then follows on the event
        loop): ``data`` then ``rest`` at the end of the file, truncated back on a short
        or failed write. OSError propagates."""
        position = self.size
        try:
            parts = [memoryview(data), memoryview(rest)]
            while parts:
                written = os.writev(self._fd, parts)
                while parts and written >= len(parts[0]):
                    written -= len(parts.pop(0))
                if written:
                    parts[0] = parts[0][written:]
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, position)
            raise

    def appended(self, header: RecordBatchHeader, position: int, size: int) -> None:
        """What the segment knows of a batch `write` put at ``position``: its size, next
        offset, timestamps and the index entries Kafka adds per index.interval.bytes."""
        self.size += size
        self.next_offset = header.last_offset + 1
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    # ------------------------------------------------------------ reading

    def _read_header(self, pos: int) -> RecordBatchHeader:
        data = os.pread(self._fd, BATCH_HEADER_SIZE, pos)
        if len(data) < BATCH_HEADER_SIZE:
            raise CorruptIndexError(f"{self.log_path}: no batch header at {pos}")
        return parse_header(data)

    def iter_headers(
        self, start: int, end: int | None = None
    ) -> Iterator[tuple[int, RecordBatchHeader]]:
        """(position, header) of each batch from ``start`` (a batch boundary) up to
        ``end`` (default: the current size), reading headers in chunks so bodies are
        skipped without one syscall per batch."""
        stop = self.size if end is None else end
        pos = start
        chunk = b""
        chunk_pos = 0
        while pos + BATCH_HEADER_SIZE <= stop:
            rel = pos - chunk_pos
            if rel < 0 or rel + BATCH_HEADER_SIZE > len(chunk):
                chunk = os.pread(self._fd, max(_SCAN_CHUNK, BATCH_HEADER_SIZE), pos)
                chunk_pos, rel = pos, 0
                if len(chunk) < BATCH_HEADER_SIZE:
                    return
            header = parse_header(chunk, rel)
            size = header.batch_length + LOG_OVERHEAD
            if size < BATCH_HEADER_SIZE:
                return
            yield pos, header
            pos += size

    def find_batch(self, offset: int) -> tuple[int, RecordBatchHeader] | None:
        """Position and header of the batch containing ``offset`` (or the first batch
        after it), found through the offset index; None when past the end."""
        start = self.offset_index.lookup(offset)[1]
        for pos, header in self.iter_headers(start):
            if header.last_offset >= offset:
                return pos, header
        return None

    def find_batch_checked(self, offset: int) -> tuple[int, RecordBatchHeader] | None:
        """`find_batch` for reads served to clients: every header walked must be framed
        as this segment says (`broker/log/batch_framing.py`). Past one that is not, the
        scan resumes at the next offset index entry; raises CorruptBatchError when
        ``offset`` lies before the first valid batch found there (the segment's next
        offset when none is), so a reader is told rather than given nothing."""
        indexed_last, pos = self.offset_index.lookup(offset)
        anchor: int | None = indexed_last if pos > 0 else None
        min_base = self.base_offset
        corrupt: tuple[int, str] | None = None
        reader = _HeaderReader(self._fd)
        while pos < self.size:
            header = reader.at(pos)
            problem = (
                "a batch header cut short by the segment's end"
                if header is None
                else framing_problem(
                    header,
                    pos,
                    file_size=self.size,
                    min_base_offset=min_base,
                    next_offset=self.next_offset,
                    indexed_last_offset=anchor,
                )
            )
            if header is None or problem is not None:
                corrupt = corrupt or (pos, problem or "")
                resume = self._resume_after(pos, min_base)
                if resume is None:
                    break
                pos, anchor = resume
                continue
            if corrupt is not None:
                if offset < header.base_offset:
                    raise CorruptBatchError(self.log_path, *corrupt, header.base_offset)
                corrupt = None
            if header.last_offset >= offset:
                return pos, header
            anchor = None
            min_base = header.last_offset + 1
            pos += header.batch_length + LOG_OVERHEAD
        if corrupt is not None and offset < self.next_offset:
            raise CorruptBatchError(self.log_path, *corrupt, self.next_offset)
        return None

    def _resume_after(self, bad: int, min_base: int) -> tuple[int, int | None] | None:
        """Where a scan can go on past the bad header at ``bad``: the first batch after
        it from which whole batches chain to the next index entry (or the segment's
        end), else that entry itself (with the last offset it records), else None."""
        entry = self.offset_index.entry_after(bad)
        limit = entry[1] if entry is not None else self.size
        window = os.pread(self._fd, limit - bad - 1, bad + 1)
        found = resync_position(window, min_base_offset=min_base, next_offset=self.next_offset)
        if found is not None:
            return bad + 1 + found, None
        return (entry[1], entry[0]) if entry is not None else None

    def in_page_cache(self, position: int, length: int) -> bool:
        """Whether reading ``length`` bytes from ``position`` would not wait for the
        disk, as far as the range's first and last bytes tell: each is read with
        preadv2's RWF_NOWAIT, answered from the page cache or refused at once. Pages
        leave the cache least recently used first, and a range is written (or read) in
        order, so one whose ends are there is almost always there whole. False where the
        kernel cannot say (no RWF_NOWAIT, a file system without it, a range past the
        end); never raises."""
        if _NOWAIT is None or length <= 0:
            return False
        try:
            for at in (position, position + length - 1):
                if os.preadv(self._fd, _PROBE, at, _NOWAIT) != 1:
                    return False
        except OSError:  # BlockingIOError: not cached; EOPNOTSUPP: cannot tell
            return False
        return True

    def read_bytes(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``position`` (short only at end of file), one
        pread into a bytes object of its own (no zero-filled buffer first). Raises OSError."""
        return os.pread(self._fd, length, position)

    def find_offset_for_timestamp(
        self, timestamp: int, start_offset: int
    ) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) at or above ``timestamp`` at offsets >=
        ``start_offset``, as Kafka's LogSegment.findOffsetByTimestamp: time index
        floor, offset index to a position, then batches and their records."""
        entry = self.time_index.floor(timestamp)
        scan_offset = max(start_offset, entry[1] if entry is not None else self.base_offset)
        start = self.offset_index.lookup(scan_offset)[1]
        for pos, header in self.iter_headers(start):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            data = self.read_bytes(pos, header.size_in_bytes)
            for record in iter_records(data, header):
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None

    @property
    def rolling_timestamp(self) -> int:
        """What segment.ms counts from: the broker clock when the segment was
        created (Kafka uses the first batch's timestamp, which lets producers with
        old CreateTime timestamps force a roll on every append)."""
        return self.created_ms

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size}, next={self.next_offset})"


class _HeaderReader:
    """Batch headers at arbitrary positions, read in chunks: a scan of one index
    interval of small batches is one pread, not one per batch."""

    __slots__ = ("_chunk", "_chunk_pos", "_fd")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunk = b""
        self._chunk_pos = 0

    def at(self, pos: int) -> RecordBatchHeader | None:
        """The header at ``pos``; None when the file ends before a whole header."""
        rel = pos - self._chunk_pos
        if rel < 0 or rel + BATCH_HEADER_SIZE > len(self._chunk):
            self._chunk = os.pread(self._fd, _SCAN_CHUNK, pos)
            self._chunk_pos, rel = pos, 0
            if len(self._chunk) < BATCH_HEADER_SIZE:
                return None
        return parse_header(self._chunk, rel)
