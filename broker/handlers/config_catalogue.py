"""What DescribeConfigs says about each config: type, source, synonyms, documentation.

Kafka's enums (DescribeConfigsResponse.ConfigSource / ConfigType) and the
topic keys with their broker-level synonyms in Kafka's precedence order
(LogConfig / ServerTopicConfigSynonyms).
"""

from __future__ import annotations

import enum

import attrs


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


@attrs.frozen
class TopicConfigDef:
    name: str
    type: ConfigType
    synonyms: tuple[str, ...]
    doc: str


def _t(name: str, type_: ConfigType, synonyms: tuple[str, ...], doc: str) -> TopicConfigDef:
    return TopicConfigDef(name, type_, synonyms, doc)


# fmt: off
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _t("cleanup.policy", ConfigType.LIST, ("log.cleanup.policy",), "delete: old segments are discarded by time or size (compact is not supported yet)."),
    _t("compression.type", ConfigType.STRING, ("compression.type",), "Final compression of the topic's data; producer keeps the producer's codec."),
    _t("flush.messages", ConfigType.LONG, ("log.flush.interval.messages",), "Messages written before the log is fsynced."),
    _t("flush.ms", ConfigType.LONG, ("log.flush.interval.ms",), "Time before the log is fsynced."),
    _t("index.interval.bytes", ConfigType.INT, ("log.index.interval.bytes",), "Bytes between offset-index entries."),
    _t("max.message.bytes", ConfigType.INT, ("message.max.bytes",), "Largest record batch the topic accepts."),
    _t("message.timestamp.after.max.ms", ConfigType.LONG, ("log.message.timestamp.after.max.ms",), "How far in the future a CreateTime timestamp may be."),
    _t("message.timestamp.before.max.ms", ConfigType.LONG, ("log.message.timestamp.before.max.ms",), "How far in the past a CreateTime timestamp may be."),
    _t("message.timestamp.type", ConfigType.STRING, ("log.message.timestamp.type",), "CreateTime (the producer's) or LogAppendTime (the broker's clock)."),
    _t("min.insync.replicas", ConfigType.INT, ("min.insync.replicas",), "Replicas that must acknowledge an acks=all produce."),
    _t("retention.bytes", ConfigType.LONG, ("log.retention.bytes",), "Largest size of a partition before old segments are deleted; -1 unlimited."),
    _t("retention.ms", ConfigType.LONG, ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), "How long data is kept; -1 forever."),
    _t("segment.bytes", ConfigType.INT, ("log.segment.bytes",), "Segment size before a new one is rolled."),
    _t("segment.ms", ConfigType.LONG, ("log.roll.ms", "log.roll.hours"), "Time before a new segment is rolled."),
)}
# fmt: on

LIST_TOPIC_CONFIGS = frozenset(d.name for d in TOPIC_CONFIGS.values() if d.type == ConfigType.LIST)

DYNAMIC_BROKER_CONFIGS = frozenset({"num.network.threads", "num.io.threads"})
"""Broker keys this broker can change at runtime (IncrementalAlterConfigs/AlterConfigs)."""
