"""`partition.metadata` in each partition dir: the topic id the log belongs to.

A dir's name says only the topic's name; a topic deleted and created again with the
same name while a broker was down leaves that broker an old dir under the new topic's
name. Kafka 2.8+ writes the topic id beside the log (version 0 of this two-line file)
so a broker can tell the old log from the new topic's; we write the same file.
"""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from pathlib import Path

from broker.log._files import atomic_write

logger = logging.getLogger(__name__)

PARTITION_METADATA_FILE = "partition.metadata"
CURRENT_VERSION = 0


class MalformedPartitionMetadata(ValueError):
    """The file is there but is not version-0 `partition.metadata`."""


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_topic_id(text: str) -> uuid.UUID:
    """Kafka's `Uuid.fromString`; ValueError when it is not 16 bytes of base64."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not a topic id: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {text!r}")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    """Atomically, fsynced (worker thread); OSError propagates."""
    text = f"version: {CURRENT_VERSION}\ntopic_id: {topic_id_string(topic_id)}\n"
    atomic_write(directory / PARTITION_METADATA_FILE, text.encode())


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id the dir's file names; None when the dir has none (a log written
    before the file existed). MalformedPartitionMetadata when it cannot be read as
    Kafka reads it (`key: value` lines, version >= 0, a non-zero id)."""
    path = directory / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedPartitionMetadata(f"{path}: {exc}") from exc
    lines = text.splitlines()
    fields = [line.split(":", 1) for line in lines[:2]]
    if len(fields) != 2 or [f[0] for f in fields] != ["version", "topic_id"]:
        raise MalformedPartitionMetadata(f"{path}: malformed: {text[:100]!r}")
    try:
        version = int(fields[0][1].strip())
        topic_id = parse_topic_id(fields[1][1].strip())
    except ValueError as exc:
        raise MalformedPartitionMetadata(f"{path}: {exc}") from exc
    if version < CURRENT_VERSION or topic_id.int == 0:
        raise MalformedPartitionMetadata(f"{path}: version {version}, topic id {topic_id}")
    return topic_id


def adopt_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    """Write the file into a dir that has none (or one that cannot be read), as Kafka
    gives a log from before 2.8 the topic id it is now opened for (worker thread)."""
    try:
        if read_partition_metadata(directory) is not None:
            return
    except MalformedPartitionMetadata as exc:
        logger.warning("rewriting unreadable partition metadata: %s", exc)
    write_partition_metadata(directory, topic_id)
