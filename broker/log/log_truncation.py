"""The file steps of cutting a partition's log (Kafka's Log.truncateTo and
truncateFullyAndStartAt), in an order that a crash between any two of them leaves a
log the next load recovers to a consistent state.

A segment's files go index files first and the `.log` last, so a crash never leaves
indexes without their log (a new segment at that base would find them); segments go
newest first, so what remains is always a prefix of the old log, which a follower
truncates again after its restart (the fetcher starts every partition by asking the
leader where the logs diverge). Producer snapshots past the cut go before the log is
cut, so no snapshot describes records the log no longer has.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from pathlib import Path

from broker.log.log_segment import LogSegment
from broker.log.producer_state import SNAPSHOT_SUFFIX


def unlink_newest_first(segments: Sequence[LogSegment]) -> None:
    """Remove whole segments' files (worker thread); missing files are ignored."""
    for segment in sorted(segments, key=lambda s: s.base_offset, reverse=True):
        paths = (
            segment.txn_index.path,
            segment.time_index.path,
            segment.offset_index.path,
            segment.log_path,
        )
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def delete_snapshots_after(directory: Path, offset: int) -> None:
    """Remove producer snapshots taken past ``offset`` (worker thread)."""
    for path in directory.glob("*" + SNAPSHOT_SUFFIX):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if stem.isdigit() and int(stem) > offset:
            path.unlink(missing_ok=True)


def truncation_steps(
    directory: Path,
    kept: LogSegment,
    doomed: Sequence[LogSegment],
    offset: int,
    *,
    corrupt: bool = False,
) -> list[Callable[[], object]]:
    """The file steps of truncating to ``offset``, in crash-safe order: snapshots past
    it, the later segments newest first, then the segment holding it cut (run in a
    worker thread; a test may stop after any of them to play a crash). ``corrupt``:
    `kept` holds the corrupt batch the cut removes (`LogSegment.truncate_to`)."""
    steps: list[Callable[[], object]] = [
        functools.partial(delete_snapshots_after, directory, offset)
    ]
    for segment in sorted(doomed, key=lambda s: s.base_offset, reverse=True):
        steps.append(functools.partial(unlink_newest_first, [segment]))
    steps.append(functools.partial(kept.truncate_to, offset, corrupt=corrupt))
    return steps
