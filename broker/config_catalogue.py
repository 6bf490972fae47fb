"""Every topic config key, defined once, and what DescribeConfigs says about configs.

Kafka's enums (DescribeConfigsResponse.ConfigSource / ConfigType) and, for each
topic key, its type, value parser (type and range, as Kafka's LogConfig
defines them), broker-level synonyms in Kafka's precedence order
(ServerTopicConfigSynonyms) and documentation. The log validates topic
configs and derives their defaults from here; DescribeConfigs describes them
from here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(enum.IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


BROKER_CONFIG_TYPES = {
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "bool": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "list": ConfigType.LIST,
    "password": ConfigType.PASSWORD,
    "double": ConfigType.DOUBLE,
}


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4


Parser = Callable[[str], object]
"""Turns a topic config's string value into its typed value; ValueError says why not."""


def int_in(low: int, high: int) -> Parser:
    def parse(text: str) -> object:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("expected an integer") from None
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse


def choice(*choices: str) -> Parser:
    def parse(text: str) -> object:
        value = text.strip()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


def cleanup_policy(text: str) -> object:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items or any(item not in ("delete", "compact") for item in items):
        raise ValueError("must be a list of delete and/or compact")
    return tuple(items)


def boolean(text: str) -> object:
    if text.strip().lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return text.strip().lower() == "true"


def double(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        raise ValueError("expected a number") from None


@attrs.frozen
class TopicConfigDef:
    """One topic key. `default` is its value when no broker key is a synonym (the
    keys accepted for compatibility that have no effect here)."""

    name: str
    type: ConfigType
    parse: Parser
    synonyms: tuple[str, ...]
    doc: str
    default: str | None = None


def _t(
    name: str,
    type_: ConfigType,
    parse: Parser,
    synonyms: tuple[str, ...],
    doc: str,
    default: str | None = None,
) -> TopicConfigDef:
    return TopicConfigDef(name, type_, parse, synonyms, doc, default)


_NO_EFFECT = "Accepted for compatibility; no effect here"


# fmt: off
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _t("cleanup.policy", ConfigType.LIST, cleanup_policy, ("log.cleanup.policy",), "delete: old segments are discarded by time or size; compact: the log cleaner keeps the latest record of each key (docs/compaction.md); or both."),
    _t("compression.type", ConfigType.STRING, choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), ("compression.type",), "Final compression of the topic's data; producer keeps the producer's codec."),
    _t("flush.messages", ConfigType.LONG, int_in(1, LONG_MAX), ("log.flush.interval.messages",), "Messages written before the log is fsynced."),
    _t("flush.ms", ConfigType.LONG, int_in(0, LONG_MAX), ("log.flush.interval.ms",), "Time before the log is fsynced."),
    _t("index.interval.bytes", ConfigType.INT, int_in(0, INT_MAX), ("log.index.interval.bytes",), "Bytes between offset-index entries."),
    _t("max.message.bytes", ConfigType.INT, int_in(0, INT_MAX), ("message.max.bytes",), "Largest record batch the topic accepts."),
    _t("message.timestamp.after.max.ms", ConfigType.LONG, int_in(0, LONG_MAX), ("log.message.timestamp.after.max.ms",), "How far in the future a CreateTime timestamp may be."),
    _t("message.timestamp.before.max.ms", ConfigType.LONG, int_in(0, LONG_MAX), ("log.message.timestamp.before.max.ms",), "How far in the past a CreateTime timestamp may be."),
    _t("message.timestamp.type", ConfigType.STRING, choice("CreateTime", "LogAppendTime"), ("log.message.timestamp.type",), "CreateTime (the producer's) or LogAppendTime (the broker's clock)."),
    _t("min.insync.replicas", ConfigType.INT, int_in(1, INT_MAX), ("min.insync.replicas",), "Replicas that must acknowledge an acks=all produce."),
    _t("retention.bytes", ConfigType.LONG, int_in(-(2**63), LONG_MAX), ("log.retention.bytes",), "Largest size of a partition before old segments are deleted; -1 unlimited."),
    _t("retention.ms", ConfigType.LONG, int_in(-1, LONG_MAX), ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), "How long data is kept; -1 forever."),
    _t("segment.bytes", ConfigType.INT, int_in(14, INT_MAX), ("log.segment.bytes",), "Segment size before a new one is rolled."),
    _t("segment.index.bytes", ConfigType.INT, int_in(4, INT_MAX), ("log.index.size.max.bytes",), "Largest size of a segment's offset and time indexes."),
    _t("segment.ms", ConfigType.LONG, int_in(1, LONG_MAX), ("log.roll.ms", "log.roll.hours"), "Time before a new segment is rolled."),
    _t("delete.retention.ms", ConfigType.LONG, int_in(0, LONG_MAX), ("log.cleaner.delete.retention.ms",), "How long a tombstone (and a removable transaction marker) stays after the cleaner first keeps it."),
    _t("max.compaction.lag.ms", ConfigType.LONG, int_in(1, LONG_MAX), ("log.cleaner.max.compaction.lag.ms",), "Longest a record stays uncompacted: older dirty data makes the log cleanable whatever its dirty ratio, and the active segment rolls at this age."),
    _t("min.cleanable.dirty.ratio", ConfigType.DOUBLE, double, ("log.cleaner.min.cleanable.ratio",), "Dirty bytes over all cleanable bytes above which the cleaner cleans the log."),
    _t("min.compaction.lag.ms", ConfigType.LONG, int_in(0, LONG_MAX), ("log.cleaner.min.compaction.lag.ms",), "Shortest time a record stays uncompacted."),
    # Known to Kafka and accepted so that admin tools setting them do not fail; they
    # have no effect here (no replication, no preallocation).
    _t("file.delete.delay.ms", ConfigType.LONG, int_in(0, LONG_MAX), (), f"{_NO_EFFECT} (segments are deleted at once).", "60000"),
    _t("message.downconversion.enable", ConfigType.BOOLEAN, boolean, (), f"{_NO_EFFECT}.", "true"),
    _t("preallocate", ConfigType.BOOLEAN, boolean, (), f"{_NO_EFFECT} (no preallocation).", "false"),
    _t("segment.jitter.ms", ConfigType.LONG, int_in(0, LONG_MAX), (), f"{_NO_EFFECT} (no roll jitter).", "0"),
    _t("unclean.leader.election.enable", ConfigType.BOOLEAN, boolean, (), f"{_NO_EFFECT} (no replication).", "false"),
)}
# fmt: on

LIST_TOPIC_CONFIGS = frozenset(d.name for d in TOPIC_CONFIGS.values() if d.type == ConfigType.LIST)

THREAD_COUNT_CONFIGS = frozenset({"num.network.threads", "num.io.threads"})
"""Dynamic keys that resize a pool (Kafka's half..double rule applies)."""
CONNECTION_QUOTA_CONFIGS = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
    }
)
"""Dynamic keys of the acceptors' connection quotas (Kafka's DynamicConnectionQuota)."""
DYNAMIC_BROKER_CONFIGS = THREAD_COUNT_CONFIGS | CONNECTION_QUOTA_CONFIGS
"""Broker keys this broker can change at runtime (IncrementalAlterConfigs/AlterConfigs)."""
