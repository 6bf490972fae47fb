"""Kept so that existing imports work: the topic keys and the config enums live in
`broker.config.topic_keys` and `broker.config.types`."""

from broker.config.topic_keys import (
    CONNECTION_QUOTA_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    INT_MAX,
    LIST_TOPIC_CONFIGS,
    LONG_MAX,
    THREAD_COUNT_CONFIGS,
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    ResourceType,
    TopicConfigDef,
)

__all__ = [
    "CONNECTION_QUOTA_CONFIGS",
    "DYNAMIC_BROKER_CONFIGS",
    "INT_MAX",
    "LIST_TOPIC_CONFIGS",
    "LONG_MAX",
    "THREAD_COUNT_CONFIGS",
    "TOPIC_CONFIGS",
    "ConfigSource",
    "ConfigType",
    "ResourceType",
    "TopicConfigDef",
]
