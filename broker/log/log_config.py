"""Per-topic config keys: broker defaults, validation and the parsed view a log uses.

Topic overrides are kept as the strings the client sent (DescribeConfigs shows
them back verbatim); `LogConfig` is the parsed, effective view a PartitionLog
reads on its hot path, rebuilt whenever a topic's configs change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from broker.config import BrokerConfig
from broker.config_catalogue import LONG_MAX, TOPIC_CONFIGS
from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode

COMPACTION_UNSUPPORTED = "log compaction is not supported yet"
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
    flush_ms = config.get_optional_int("log.flush.interval.ms")
    defaults.update(
        {
            "retention.ms": str(config.log_retention_ms),
            "segment.ms": str(config.log_roll_ms),
            "flush.ms": str(flush_ms if flush_ms is not None else LONG_MAX),
        }
    )
    return {name: value for name, value in defaults.items() if value is not None}


def validate_topic_configs(
    configs: Mapping[str, str], *, topic: str, allow_compact: bool = False
) -> None:
    """Raise KafkaError INVALID_CONFIG for an unknown key, a bad value, or
    cleanup.policy=compact (compaction does not exist yet; internal topics may carry
    the policy, their logs are then simply never deleted by retention)."""
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
                ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for topic config {key}: {exc}"
            ) from None
        if key == "cleanup.policy" and "compact" in parsed and not allow_compact:  # type: ignore[operator]
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"invalid value {value!r} for cleanup.policy of topic {topic}: "
                f"{COMPACTION_UNSUPPORTED}",
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
    validate_topic_configs(new, topic=topic, allow_compact=internal)
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

    @classmethod
    def from_effective(cls, values: Mapping[str, str]) -> LogConfig:
        return cls(
            segment_bytes=int(values["segment.bytes"]),
            segment_ms=int(values["segment.ms"]),
            retention_ms=int(values["retention.ms"]),
            retention_bytes=int(values["retention.bytes"]),
            index_interval_bytes=int(values["index.interval.bytes"]),
            flush_messages=int(values["flush.messages"]),
            flush_ms=int(values["flush.ms"]),
            max_message_bytes=int(values["max.message.bytes"]),
            log_append_time=values["message.timestamp.type"] == "LogAppendTime",
            delete_enabled="delete" in values["cleanup.policy"].split(","),
            segment_index_bytes=int(values["segment.index.bytes"]),
        )
