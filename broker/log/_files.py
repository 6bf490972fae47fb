"""Small durable-file helpers shared by the log's metadata files.

Every metadata file the log owns (topic metadata, checkpoints, producer-id block,
producer snapshots) is replaced atomically: write a temporary sibling, fsync it,
``os.replace`` it over the old one and fsync the directory, so a crash leaves
either the old or the new content, never a torn mix.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: Path) -> None:
    """Persist a directory entry change (create, rename, unlink).

    Raises OSError from open/fsync; the descriptor is always closed.
    """
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` all-or-nothing.

    ``durable=False`` skips the fsyncs (still atomic against process crashes, not
    against power loss): used on the append path where an older fallback exists.
    Raises OSError; the temporary file is removed when the write fails.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def write_offset_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    """Kafka's OffsetCheckpointFile text format: version 0, count, then
    ``topic partition offset`` lines; written atomically and durably."""
    lines = ["0", str(len(offsets))]
    lines.extend(f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items())
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Parse a checkpoint; a missing or malformed file reads as empty, which makes
    the caller fall back to the safe choice (recover everything, start at segment 0)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    result: dict[tuple[str, int], int] = {}
    lines = text.split("\n")
    try:
        if lines[0].strip() != "0":
            return {}
        count = int(lines[1])
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            result[(topic, int(partition))] = int(offset)
    except (IndexError, ValueError):
        return {}
    return result


@contextlib.contextmanager
def exclusive_flock(lock_path: Path) -> Iterator[None]:
    """An exclusive `flock` on `lock_path`, so that the processes of a cluster sharing
    a file make their read-modify-write changes one at a time (blocking: call from a
    worker thread). The lock goes with the descriptor, so a process that dies frees it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
