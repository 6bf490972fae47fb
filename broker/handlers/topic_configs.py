"""Describing a topic's configs: value, source and synonyms, as Kafka's ConfigHelper does.

A key set on the topic is DYNAMIC_TOPIC_CONFIG; otherwise the value comes
from the broker: STATIC_BROKER_CONFIG when one of its broker synonyms is in
server.properties, else DEFAULT_CONFIG. Synonyms list every place the value
could come from, most specific first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.config import BrokerConfig
from broker.config.topic_keys import TOPIC_CONFIGS
from broker.config.types import ConfigSource, ConfigType
from broker.handlers.log_view import TopicView
from broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)


def topic_config_entries(
    topic: TopicView,
    broker_config: BrokerConfig,
    defaults: Mapping[str, str],
    keys: Iterable[str] | None,
    *,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[DescribeConfigsResourceResult]:
    overrides = topic.configs()
    names = sorted(TOPIC_CONFIGS) if keys is None else [k for k in keys if k in TOPIC_CONFIGS]
    entries = []
    for name in names:
        definition = TOPIC_CONFIGS[name]
        synonyms = _synonyms(name, overrides, broker_config, defaults)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            DescribeConfigsResourceResult(
                name=name,
                value=topic.config(name),
                read_only=False,
                is_default=source == ConfigSource.DEFAULT_CONFIG,
                config_source=source,
                is_sensitive=False,
                synonyms=tuple(synonyms) if include_synonyms else (),
                config_type=definition.type if include_documentation else ConfigType.UNKNOWN,
                documentation=definition.doc if include_documentation else None,
            )
        )
    return entries


def topic_config_source(
    name: str, overrides: Mapping[str, str], broker_config: BrokerConfig
) -> ConfigSource:
    if name in overrides:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    definition = TOPIC_CONFIGS.get(name)
    if definition and any(broker_config.is_set(s) for s in definition.synonyms):
        return ConfigSource.STATIC_BROKER_CONFIG
    return ConfigSource.DEFAULT_CONFIG


def _synonyms(
    name: str,
    overrides: Mapping[str, str],
    broker_config: BrokerConfig,
    defaults: Mapping[str, str],
) -> list[DescribeConfigsSynonym]:
    synonyms = []
    if name in overrides:
        synonyms.append(
            DescribeConfigsSynonym(
                name=name, value=overrides[name], source=ConfigSource.DYNAMIC_TOPIC_CONFIG
            )
        )
    broker_keys = TOPIC_CONFIGS[name].synonyms
    raw = broker_config.raw
    for key in broker_keys:
        if key in raw:
            synonyms.append(
                DescribeConfigsSynonym(
                    name=key, value=raw[key].strip(), source=ConfigSource.STATIC_BROKER_CONFIG
                )
            )
    synonyms.append(
        DescribeConfigsSynonym(
            name=broker_keys[0] if broker_keys else name,
            value=defaults.get(name),
            source=ConfigSource.DEFAULT_CONFIG,
        )
    )
    return synonyms
