"""A topic as the handlers see it: id, partitions and its config overrides."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from broker.log.log_config import INTERNAL_TOPICS, LogConfig
from broker.log.partition_log import PartitionLog


class Topic:
    """Name, id (kept across restarts), the partitions (index = partition number)
    and the explicit per-topic overrides; everything else falls back to the
    broker defaults the LogManager passes in."""

    def __init__(
        self,
        name: str,
        topic_id: uuid.UUID,
        partitions: list[PartitionLog],
        overrides: Mapping[str, str],
        defaults: Mapping[str, str],
        *,
        num_partitions: int | None = None,
    ) -> None:
        self.name = name
        self.topic_id = topic_id
        self._partitions = partitions
        self._overrides = dict(overrides)
        self._defaults = defaults
        self._num_partitions = num_partitions
        self.is_internal = name in INTERNAL_TOPICS

    @property
    def partitions(self) -> Sequence[PartitionLog]:
        return self._partitions

    @property
    def num_partitions(self) -> int:
        """The partition count; for a ``validate_only`` creation (which creates no
        logs, so `partitions` is empty) the count that would have been created."""
        if self._num_partitions is not None:
            return self._num_partitions
        return len(self._partitions)

    def configs(self) -> Mapping[str, str]:
        """Explicit per-topic overrides only (DescribeConfigs source TOPIC_CONFIG)."""
        return dict(self._overrides)

    def config(self, key: str) -> str:
        """Effective value: the override, else the broker default. KeyError for a
        key that is not a topic config."""
        value = self._overrides.get(key)
        return value if value is not None else self._defaults[key]

    def effective_configs(self) -> dict[str, str]:
        merged = dict(self._defaults)
        merged.update(self._overrides)
        return merged

    def log_config(self) -> LogConfig:
        return LogConfig.from_effective(self.effective_configs())

    def _set_overrides(self, overrides: Mapping[str, str]) -> None:
        self._overrides = dict(overrides)
        log_config = self.log_config()
        for partition in self._partitions:
            partition.config = log_config

    def _add_partitions(self, partitions: list[PartitionLog]) -> None:
        self._partitions.extend(partitions)

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, {self.topic_id}, partitions={self.num_partitions})"
