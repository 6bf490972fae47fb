"""Topic metadata on disk: `__topics.json` in the first log dir.

One JSON document (topic id, partition count, config overrides per topic),
replaced atomically and durably on every change; there are few topics and they
change rarely, so rewriting the whole file is simpler than a log of changes and
always leaves a complete, consistent document.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from pathlib import Path

import attrs

from broker.log._files import atomic_write

TOPICS_FILE = "__topics.json"
_VERSION = 1


@attrs.frozen(slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: Mapping[str, str]


class TopicStore:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / TOPICS_FILE

    def load(self) -> dict[str, TopicRecord]:
        """Read every topic; a missing file is an empty broker. Raises OSError, or
        ValueError for a file that is not ours (the broker must not start on it)."""
        try:
            document = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        if not isinstance(document, dict) or document.get("version") != _VERSION:
            raise ValueError(f"{self.path}: unknown topic metadata format")
        topics: dict[str, TopicRecord] = {}
        for name, entry in document["topics"].items():
            topics[name] = TopicRecord(
                name,
                uuid.UUID(entry["id"]),
                int(entry["partitions"]),
                {str(k): str(v) for k, v in entry["configs"].items()},
            )
        return topics

    def save(self, topics: Mapping[str, TopicRecord]) -> None:
        """Replace the file atomically and durably (worker thread). Raises OSError."""
        document = {
            "version": _VERSION,
            "topics": {
                record.name: {
                    "id": str(record.topic_id),
                    "partitions": record.num_partitions,
                    "configs": dict(record.configs),
                }
                for record in topics.values()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(document, indent=1, sort_keys=True).encode())
