"""Configuration: the lowest layer after protocol and errors (it imports nothing else
of the broker). One table of keys (`table.py`), the config built from it
(`broker_config.py`), typed settings groups for the subsystems (`settings.py`),
listener parsing (`endpoint.py`), the .properties format (`properties.py`) and the
topic keys (`topic_keys.py`)."""

from broker.config.broker_config import (
    HIDDEN,
    BrokerConfig,
    load_config,
    unknown_key_warning,
)
from broker.config.endpoint import Endpoint
from broker.config.errors import CONFIG_ERROR_EXIT_CODE, ConfigError
from broker.config.properties import escape_properties_text, parse_properties
from broker.config.table import (
    CONFIG_DEFS,
    DYNAMIC_BROKER_CONFIGS,
    PER_LISTENER_KEYS,
    PER_MECHANISM_KEYS,
    ConfigDef,
    DynamicMode,
)
from broker.config.types import INT_MAX, LONG_MAX, ConfigType, split_list
from broker.config.validators import AUTHORIZER_CLASS_NAMES, parse_ip_overrides

__all__ = [
    "AUTHORIZER_CLASS_NAMES",
    "CONFIG_DEFS",
    "CONFIG_ERROR_EXIT_CODE",
    "DYNAMIC_BROKER_CONFIGS",
    "HIDDEN",
    "INT_MAX",
    "LONG_MAX",
    "PER_LISTENER_KEYS",
    "PER_MECHANISM_KEYS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "ConfigType",
    "DynamicMode",
    "Endpoint",
    "escape_properties_text",
    "load_config",
    "parse_ip_overrides",
    "parse_properties",
    "split_list",
    "unknown_key_warning",
]
