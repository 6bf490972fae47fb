"""Every topic config key, defined once, and what DescribeConfigs says about configs.

For each topic key: its type (the one vocabulary, broker/config/types.py), value
parser (type and range, as Kafka's LogConfig defines them), documentation, and its
broker-level synonyms in Kafka's precedence order (ServerTopicConfigSynonyms), taken
from the broker key table's `topic` column. The log validates topic
configs and derives their defaults from here; DescribeConfigs describes them
from here.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from broker.config.table import TOPIC_SYNONYMS
from broker.config.types import INT_MAX, LONG_MAX, ConfigType

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


def throttled_replicas(text: str) -> object:
    """Kafka's ThrottledReplicaListValidator: `*` or `partition:broker` pairs."""
    stripped = text.strip()
    if stripped == "*":
        return stripped
    for entry in (e.strip() for e in stripped.split(",")):
        parts = entry.split(":")
        if entry and (len(parts) != 2 or not all(p.strip().isdigit() for p in parts)):
            raise ValueError(f"must be * or a list of partition:broker pairs, not {entry!r}")
    return stripped


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
    name: str, type_: ConfigType, parse: Parser, doc: str, default: str | None = None
) -> TopicConfigDef:
    """A topic key whose broker synonyms are the broker keys naming it in the key table."""
    return TopicConfigDef(name, type_, parse, TOPIC_SYNONYMS.get(name, ()), doc, default)


_NO_EFFECT = "Accepted for compatibility; no effect here"


# fmt: off
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _t("cleanup.policy", ConfigType.LIST, cleanup_policy, "delete: old segments are discarded by time or size; compact: the log cleaner keeps the latest record of each key (docs/compaction.md); or both."),
    _t("compression.type", ConfigType.STRING, choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), "Final compression of the topic's data; producer keeps the producer's codec."),
    _t("flush.messages", ConfigType.LONG, int_in(1, LONG_MAX), "Messages written before the log is fsynced."),
    _t("flush.ms", ConfigType.LONG, int_in(0, LONG_MAX), "Time before the log is fsynced."),
    _t("index.interval.bytes", ConfigType.INT, int_in(0, INT_MAX), "Bytes between offset-index entries."),
    _t("max.message.bytes", ConfigType.INT, int_in(0, INT_MAX), "Largest record batch the topic accepts."),
    _t("message.timestamp.after.max.ms", ConfigType.LONG, int_in(0, LONG_MAX), "How far in the future a CreateTime timestamp may be."),
    _t("message.timestamp.before.max.ms", ConfigType.LONG, int_in(0, LONG_MAX), "How far in the past a CreateTime timestamp may be."),
    _t("message.timestamp.type", ConfigType.STRING, choice("CreateTime", "LogAppendTime"), "CreateTime (the producer's) or LogAppendTime (the broker's clock)."),
    _t("min.insync.replicas", ConfigType.INT, int_in(1, INT_MAX), "Replicas that must acknowledge an acks=all produce."),
    _t("retention.bytes", ConfigType.LONG, int_in(-(2**63), LONG_MAX), "Largest size of a partition before old segments are deleted; -1 unlimited."),
    _t("retention.ms", ConfigType.LONG, int_in(-1, LONG_MAX), "How long data is kept; -1 forever."),
    _t("segment.bytes", ConfigType.INT, int_in(14, INT_MAX), "Segment size before a new one is rolled."),
    _t("segment.index.bytes", ConfigType.INT, int_in(4, INT_MAX), "Largest size of a segment's offset and time indexes."),
    _t("segment.ms", ConfigType.LONG, int_in(1, LONG_MAX), "Time before a new segment is rolled."),
    _t("delete.retention.ms", ConfigType.LONG, int_in(0, LONG_MAX), "How long a tombstone (and a removable transaction marker) stays after the cleaner first keeps it."),
    _t("max.compaction.lag.ms", ConfigType.LONG, int_in(1, LONG_MAX), "Longest a record stays uncompacted: older dirty data makes the log cleanable whatever its dirty ratio, and the active segment rolls at this age."),
    _t("min.cleanable.dirty.ratio", ConfigType.DOUBLE, double, "Dirty bytes over all cleanable bytes above which the cleaner cleans the log."),
    _t("min.compaction.lag.ms", ConfigType.LONG, int_in(0, LONG_MAX), "Shortest time a record stays uncompacted."),
    _t("unclean.leader.election.enable", ConfigType.BOOLEAN, boolean, "Whether the controller may elect a live replica outside the ISR when no ISR member is live, losing the records only the ISR had (with zookeeper.connect)."),
    _t("leader.replication.throttled.replicas", ConfigType.LIST, throttled_replicas, "Replicas whose leader throttles what it sends to followers not in sync to leader.replication.throttled.rate: partition:broker pairs (the leader's id), or * for every replica (with zookeeper.connect).", ""),
    _t("follower.replication.throttled.replicas", ConfigType.LIST, throttled_replicas, "Replicas whose follower, while not in sync, throttles its fetches to follower.replication.throttled.rate: partition:broker pairs (the follower's id), or * for every replica (with zookeeper.connect).", ""),
    # Known to Kafka and accepted so that admin tools setting them do not fail; they
    # have no effect here (no preallocation).
    _t("file.delete.delay.ms", ConfigType.LONG, int_in(0, LONG_MAX), f"{_NO_EFFECT} (segments are deleted at once).", "60000"),
    _t("message.downconversion.enable", ConfigType.BOOLEAN, boolean, f"{_NO_EFFECT}.", "true"),
    _t("preallocate", ConfigType.BOOLEAN, boolean, f"{_NO_EFFECT} (no preallocation).", "false"),
    _t("segment.jitter.ms", ConfigType.LONG, int_in(0, LONG_MAX), f"{_NO_EFFECT} (no roll jitter).", "0"),
)}
# fmt: on

LIST_TOPIC_CONFIGS = frozenset(d.name for d in TOPIC_CONFIGS.values() if d.type == ConfigType.LIST)

__all__ = ["LIST_TOPIC_CONFIGS", "TOPIC_CONFIGS", "TopicConfigDef"]
