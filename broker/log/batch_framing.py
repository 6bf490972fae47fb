"""Whether a batch header read back from a segment is where the segment says it is.

Reads used to trust the segment file: a batch header destroyed on disk (a bad
sector, a stray write) ended the scan for an offset as if the segment ended there,
and Fetch below the high watermark answered no error and no bytes, so consumers
waited for ever. The read path now checks each header it walks against what the
segment knows (its size, its offsets, the index entry it started from). These are
cheap checks of header fields; the CRC of the bodies stays the clients' to verify
(`check.crcs`), as in Kafka, whose broker sends log bytes without reading them.
"""

from __future__ import annotations

from pathlib import Path

from broker.protocol.record_batch.layout import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    RecordBatchHeader,
    parse_header,
)

_MAGIC_BYTE = bytes([MAGIC_V2])


class CorruptBatchError(Exception):
    """A batch at `position` of `path` fails framing: offsets from the one asked for up
    to `next_readable` (exclusive) cannot be read; `next_readable` is the first offset
    of a valid batch after it (the segment's next offset when none is known)."""

    def __init__(self, path: Path, position: int, problem: str, next_readable: int) -> None:
        super().__init__(f"corrupt batch at position {position} of {path}: {problem}")
        self.path = path
        self.position = position
        self.problem = problem
        self.next_readable = next_readable


def framing_problem(
    header: RecordBatchHeader,
    position: int,
    *,
    file_size: int,
    min_base_offset: int,
    next_offset: int,
    indexed_last_offset: int | None = None,
) -> str | None:
    """Why the header at `position` cannot be a batch of this segment, or None.

    `min_base_offset` is the offset after the previous batch (the segment's base
    offset at its start), `next_offset` the segment's next offset, and
    `indexed_last_offset` the last offset the offset index records for a batch at
    this position, when the scan starts from an index entry.
    """
    size = header.batch_length + LOG_OVERHEAD
    if header.magic != MAGIC_V2:
        return f"magic byte {header.magic}, expected {MAGIC_V2}"
    if size < BATCH_HEADER_SIZE:
        return f"batch length {header.batch_length} is shorter than a batch header"
    if position + size > file_size:
        return f"a batch of {size} bytes would end past the segment's {file_size} bytes"
    if header.last_offset_delta < 0:
        return f"negative last offset delta {header.last_offset_delta}"
    if header.base_offset < min_base_offset:
        return f"base offset {header.base_offset} is below {min_base_offset}"
    if header.last_offset >= next_offset:
        return f"last offset {header.last_offset} is not below the segment's end {next_offset}"
    if indexed_last_offset is not None and header.last_offset != indexed_last_offset:
        return f"last offset {header.last_offset} differs from the index's {indexed_last_offset}"
    return None


def resync_position(window: bytes, *, min_base_offset: int, next_offset: int) -> int | None:
    """The first position in `window` from which well-framed batches follow one another
    to exactly its end, or None.

    `window` holds the bytes after a bad header up to a known batch boundary (an offset
    index entry, or the segment's end), so the batches after the bad one are found again
    rather than skipped with it up to that boundary. A false start would have to frame
    batch after batch by chance, with increasing offsets, and land on the boundary.
    """
    candidate = window.find(_MAGIC_BYTE, MAGIC_OFFSET) - MAGIC_OFFSET
    while candidate >= 0:
        if _chains_to_end(window, candidate, min_base_offset, next_offset):
            return candidate
        candidate = window.find(_MAGIC_BYTE, candidate + 1 + MAGIC_OFFSET) - MAGIC_OFFSET
    return None


def _chains_to_end(window: bytes, pos: int, min_base_offset: int, next_offset: int) -> bool:
    end = len(window)
    while pos < end:
        if pos + BATCH_HEADER_SIZE > end:
            return False
        header = parse_header(window, pos)
        fits = {"file_size": end, "min_base_offset": min_base_offset, "next_offset": next_offset}
        if framing_problem(header, pos, **fits) is not None:
            return False
        min_base_offset = header.last_offset + 1
        pos += header.batch_length + LOG_OVERHEAD
    return True
