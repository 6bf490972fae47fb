"""The `leader-epoch-checkpoint` file, in Kafka's format so its tools read it.

    0          <- version
    2          <- number of entries
    0 0        <- epoch start-offset
    3 1200

Written as Kafka's CheckpointFile writes: to `<name>.tmp`, flushed and fsynced,
then renamed over the file and the directory fsynced, so a crash leaves either
the old file or the new one, never a torn mix.
"""

from __future__ import annotations

import os
from pathlib import Path

from broker.replication.leader_epoch_cache import EpochEntry

LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0


class MalformedCheckpoint(ValueError):
    """The file is not Kafka's checkpoint format (Kafka refuses to start on it too)."""


def encode_checkpoint(entries: tuple[EpochEntry, ...]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode()


def decode_checkpoint(
    data: bytes, source: str = LEADER_EPOCH_CHECKPOINT_FILENAME
) -> list[EpochEntry]:
    try:
        lines = data.decode("ascii").splitlines()
        version, count = int(lines[0]), int(lines[1])
        rows = [line.split() for line in lines[2:] if line.strip()]
        entries = [EpochEntry(int(epoch), int(offset)) for epoch, offset in rows]
    except (UnicodeDecodeError, IndexError, ValueError):
        raise MalformedCheckpoint(f"{source}: not a leader-epoch checkpoint") from None
    if version != CHECKPOINT_VERSION:
        raise MalformedCheckpoint(f"{source}: unknown version {version}")
    if len(entries) != count:
        raise MalformedCheckpoint(f"{source}: {count} entries announced, {len(entries)} found")
    if any(e.epoch < 0 or e.start_offset < 0 for e in entries):
        raise MalformedCheckpoint(f"{source}: negative epoch or offset")
    return entries


def read_checkpoint(path: Path) -> list[EpochEntry]:
    """The entries, or none when the file does not exist yet (a new replica)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return decode_checkpoint(data, str(path))


def write_checkpoint(path: Path, entries: tuple[EpochEntry, ...]) -> None:
    """Atomically replace the file; blocking (the caller runs it in `trio.to_thread`)."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as file:
        file.write(encode_checkpoint(entries))
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
