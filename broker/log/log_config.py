"""Per-topic config keys: broker defaults, validation and the parsed view a log uses.

Topic overrides are kept as the strings the client sent (DescribeConfigs shows
them back verbatim); `LogConfig` is the parsed, effective view a PartitionLog
reads on its hot path, rebuilt whenever a topic's configs change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from broker.config import BrokerConfig
from broker.errors import KafkaError
from broker.handlers.config_catalogue import TOPIC_CONFIGS
from broker.protocol.error_codes import ErrorCode

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

COMPACTION_UNSUPPORTED = "log compaction is not supported yet"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _int_parser(low: int, high: int) -> Callable[[str], object]:
    def parse(text: str) -> object:
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse


def _choice(*choices: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        value = text.strip()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


def _policy(text: str) -> object:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items or any(item not in ("delete", "compact") for item in items):
        raise ValueError("must be a list of delete and/or compact")
    return tuple(items)


def _bool(text: str) -> object:
    if text.strip().lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return text.strip().lower() == "true"


def _double(text: str) -> object:
    return float(text)


_PARSERS: dict[str, Callable[[str], object]] = {
    "cleanup.policy": _policy,
    "retention.ms": _int_parser(-1, LONG_MAX),
    "retention.bytes": _int_parser(-(2**63), LONG_MAX),
    "segment.bytes": _int_parser(14, INT_MAX),
    "segment.ms": _int_parser(1, LONG_MAX),
    "max.message.bytes": _int_parser(0, INT_MAX),
    "message.timestamp.type": _choice("CreateTime", "LogAppendTime"),
    "index.interval.bytes": _int_parser(0, INT_MAX),
    "flush.messages": _int_parser(1, LONG_MAX),
    "flush.ms": _int_parser(0, LONG_MAX),
    "min.insync.replicas": _int_parser(1, INT_MAX),
    "compression.type": _choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "message.timestamp.before.max.ms": _int_parser(0, LONG_MAX),
    "message.timestamp.after.max.ms": _int_parser(0, LONG_MAX),
    # Known to Kafka and accepted so that admin tools setting them do not fail;
    # they have no effect here (no compaction, no replication, no preallocation).
    "segment.index.bytes": _int_parser(4, INT_MAX),
    "segment.jitter.ms": _int_parser(0, LONG_MAX),
    "preallocate": _bool,
    "delete.retention.ms": _int_parser(0, LONG_MAX),
    "min.compaction.lag.ms": _int_parser(0, LONG_MAX),
    "max.compaction.lag.ms": _int_parser(1, LONG_MAX),
    "min.cleanable.dirty.ratio": _double,
    "file.delete.delay.ms": _int_parser(0, LONG_MAX),
    "unclean.leader.election.enable": _bool,
    "message.downconversion.enable": _bool,
}

_STATIC_DEFAULTS = {
    "segment.jitter.ms": "0",
    "preallocate": "false",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": str(LONG_MAX),
    "min.cleanable.dirty.ratio": "0.5",
    "file.delete.delay.ms": "60000",
    "unclean.leader.election.enable": "false",
    "message.downconversion.enable": "true",
}


def broker_topic_defaults(config: BrokerConfig) -> dict[str, str]:
    """Each topic key's broker-level default, from the broker keys Kafka maps them to.

    The mapping is TOPIC_CONFIGS' synonyms (one definition, also what DescribeConfigs
    reports); only keys whose default is computed from several broker keys are spelled
    out here."""
    effective = config.effective()
    defaults = {
        name: effective[definition.synonyms[0]]
        for name, definition in TOPIC_CONFIGS.items()
        if len(definition.synonyms) == 1
    }
    flush_ms = config.get_optional_int("log.flush.interval.ms")
    defaults.update(
        {
            "retention.ms": str(config.log_retention_ms),
            "segment.ms": str(config.log_roll_ms),
            "flush.ms": str(flush_ms if flush_ms is not None else LONG_MAX),
            "segment.index.bytes": str(config.get_int("log.index.size.max.bytes")),
        }
    )
    defaults.update(_STATIC_DEFAULTS)
    return defaults


def validate_topic_configs(
    configs: Mapping[str, str], *, topic: str, allow_compact: bool = False
) -> None:
    """Raise KafkaError INVALID_CONFIG for an unknown key, a bad value, or
    cleanup.policy=compact (compaction does not exist yet; internal topics may carry
    the policy, their logs are then simply never deleted by retention)."""
    for key, value in configs.items():
        parser = _PARSERS.get(key)
        if parser is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"topic config {key} has a null value")
        try:
            parsed = parser(value)
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
