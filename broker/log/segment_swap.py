"""How a cleaned segment replaces the one it was made from, crash-safely (Kafka's
`.cleaned` / `.swap` protocol, one segment replaced by one segment of the same base
offset):

1. the cleaner writes the replacement's four files as `<base>.log.cleaned`,
   `.index.cleaned`, `.timeindex.cleaned`, `.txnindex.cleaned` and fsyncs them;
2. it renames them to `.swap`, the indexes first and the `.log` last, and fsyncs the
   directory: a `<base>.log.swap` is the commitment, it exists only once the whole
   replacement is durable;
3. each `.swap` replaces its file (`os.replace`, atomic), the indexes first and the
   `.log` last, then the directory is fsynced.

After a crash (`finish_interrupted_swaps`, run before a partition loads): a
`<base>.log.swap` means step 3 was under way, so every remaining `.swap` of that base
replaces its file; without it the replacement was never committed and the old
segment is intact, its `.cleaned` and stray `.swap` files being deleted by the
loader as leftovers. Either way the log reads as before the pass or as after it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from broker.log._files import fsync_dir
from broker.log.log_segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from broker.log.transaction_index import TXN_INDEX_SUFFIX

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# Indexes first, the .log last: see the module docstring.
_SWAP_ORDER = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)


def _name(base: int, suffix: str) -> str:
    return segment_file_name(base, suffix)


def commit_cleaned(directory: Path, base: int) -> None:
    """Step 2: the complete, fsynced `.cleaned` files become `.swap` files (worker
    thread). A missing `.txnindex.cleaned` (no aborted transactions) is created empty
    so that the swap also replaces a stale transaction index."""
    txn = directory / (_name(base, TXN_INDEX_SUFFIX) + CLEANED_SUFFIX)
    if not txn.exists():
        txn.touch()
    for suffix in _SWAP_ORDER:
        name = _name(base, suffix)
        os.replace(directory / (name + CLEANED_SUFFIX), directory / (name + SWAP_SUFFIX))
    fsync_dir(directory)


def replace_with_swap(directory: Path, base: int) -> None:
    """Step 3 (without the directory fsync, which the caller does in a thread):
    every `.swap` of ``base`` replaces its file, the `.log` last. Cheap enough for
    the event loop (renames only)."""
    for suffix in _SWAP_ORDER:
        name = _name(base, suffix)
        with contextlib.suppress(FileNotFoundError):
            os.replace(directory / (name + SWAP_SUFFIX), directory / name)


def discard_cleaned(directory: Path, base: int) -> None:
    """Remove an uncommitted or unused replacement (`.cleaned` and `.swap` files)."""
    for suffix in _SWAP_ORDER:
        for marker in (CLEANED_SUFFIX, SWAP_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                (directory / (_name(base, suffix) + marker)).unlink()


def finish_interrupted_swaps(directory: Path) -> list[int]:
    """Complete every committed replacement a crash interrupted (worker thread, before
    the partition loads); returns their base offsets."""
    finished = []
    log_swap = LOG_SUFFIX + SWAP_SUFFIX
    for entry in os.scandir(directory):
        stem = entry.name[: -len(log_swap)]
        if entry.name.endswith(log_swap) and stem.isdigit():
            replace_with_swap(directory, int(stem))
            finished.append(int(stem))
    if finished:
        fsync_dir(directory)
    return sorted(finished)
