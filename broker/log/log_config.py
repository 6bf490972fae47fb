"""Per-topic config keys: broker defaults, validation and the parsed view a log uses.

Topic overrides are kept as the strings the client sent (DescribeConfigs shows
them back verbatim); `LogConfig` is the parsed, effective view a PartitionLog
reads on its hot path, rebuilt whenever a topic's configs change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from broker.config import LONG_MAX, BrokerConfig
from broker.config.topic_keys import TOPIC_CONFIGS
from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def broker_topic_defaults(config: BrokerConfig) -> dict[str, str]:
    """Each topic key's broker-level default, from the broker keys Kafka maps them to.

    The mapping is TOPIC_CONFIGS' synonyms (one definition, also what DescribeConfigs
    reports); keys without a broker synonym have their own default there, and only
    keys whose default is computed from several broker keys are spelled out here."""
    effective = config.effective()
    defaults = {
        name: effective[definition.synonyms[0]] if definition.synonyms else definition.default
        for name, definition in TOPIC_CONFIGS.items()
        if len(definition.synonyms) <= 1
    }
    flush_ms = config.log.flush_interval_ms
    defaults.update(
        {
            "retention.ms": str(config.log.retention_ms),
            "segment.ms": str(config.log.roll_ms),
            "flush.ms": str(flush_ms if flush_ms is not None else LONG_MAX),
        }
    )
    return {name: value for name, value in defaults.items() if value is not None}


def validate_topic_configs(configs: Mapping[str, str], *, topic: str) -> None:
    """Raise KafkaError INVALID_CONFIG (naming the topic) for an unknown key or a bad
    value; a bad cleanup.policy's message names the allowed values."""
    for key, value in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"topic config {key} has a null value")
        try:
            parsed = definition.parse(value)
        except ValueError as exc:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"invalid value {value!r} for topic config {key} of topic {topic}: {exc}",
            ) from None
        if key == "min.cleanable.dirty.ratio" and not 0 <= parsed <= 1:  # type: ignore[operator]
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"invalid value {value!r} for topic config {key} of topic {topic}: "
                "must be between 0 and 1",
            )


def altered_topic_configs(
    topic: str,
    current: Mapping[str, str],
    set_: Mapping[str, str],
    delete: Iterable[str],
    *,
    replace_all: bool,
    internal: bool,
) -> dict[str, str]:
    """A topic's overrides after an (Incremental)AlterConfigs, validated: `replace_all`
    (AlterConfigs) starts from none. Raises KafkaError INVALID_CONFIG."""
    new = {} if replace_all else dict(current)
    new.update(set_)
    for key in delete:
        new.pop(key, None)
    validate_topic_configs(new, topic=topic)
    return new


@attrs.frozen(slots=True)
class LogConfig:
    """The effective, parsed settings a PartitionLog acts on."""

    segment_bytes: int
    segment_ms: int
    retention_ms: int
    retention_bytes: int
    index_interval_bytes: int
    flush_messages: int
    flush_ms: int
    max_message_bytes: int
    log_append_time: bool
    delete_enabled: bool
    segment_index_bytes: int
    compact: bool = False
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    # KIP-937's limits on a CreateTime record's timestamp (LONG_MAX: none), checked by
    # the LogValidator the client append runs.
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX

    @classmethod
    def from_effective(cls, values: Mapping[str, str]) -> LogConfig:
        policy = values["cleanup.policy"].replace(" ", "").split(",")
        compact = "compact" in policy
        max_lag = int(values["max.compaction.lag.ms"])
        segment_ms = int(values["segment.ms"])
        return cls(
            segment_bytes=int(values["segment.bytes"]),
            # Kafka's LogConfig.maxSegmentMs: a compacted log's active segment rolls by
            # max.compaction.lag.ms too, or its records could never be cleaned in time.
            segment_ms=min(segment_ms, max_lag) if compact else segment_ms,
            retention_ms=int(values["retention.ms"]),
            retention_bytes=int(values["retention.bytes"]),
            index_interval_bytes=int(values["index.interval.bytes"]),
            flush_messages=int(values["flush.messages"]),
            flush_ms=int(values["flush.ms"]),
            max_message_bytes=int(values["max.message.bytes"]),
            log_append_time=values["message.timestamp.type"] == "LogAppendTime",
            delete_enabled="delete" in policy,
            segment_index_bytes=int(values["segment.index.bytes"]),
            compact=compact,
            min_cleanable_dirty_ratio=float(values["min.cleanable.dirty.ratio"]),
            min_compaction_lag_ms=int(values["min.compaction.lag.ms"]),
            max_compaction_lag_ms=max_lag,
            delete_retention_ms=int(values["delete.retention.ms"]),
            timestamp_before_max_ms=int(values["message.timestamp.before.max.ms"]),
            timestamp_after_max_ms=int(values["message.timestamp.after.max.ms"]),
        )
