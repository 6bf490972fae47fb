"""Kept so that existing imports work: listener parsing lives in `broker.config.endpoint`."""

from broker.config.endpoint import (
    DEFAULT_PROTOCOL_MAP,
    SECURITY_PROTOCOLS,
    Endpoint,
    parse_listeners,
    parse_protocol_map,
    validate_listener_uniqueness,
)
from broker.config.types import split_list

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "SECURITY_PROTOCOLS",
    "Endpoint",
    "parse_listeners",
    "parse_protocol_map",
    "split_list",
    "validate_listener_uniqueness",
]
