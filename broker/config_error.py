"""Kept so that existing imports work: the config error lives in `broker.config.errors`."""

from broker.config.errors import CONFIG_ERROR_EXIT_CODE, ConfigError

__all__ = ["CONFIG_ERROR_EXIT_CODE", "ConfigError"]
