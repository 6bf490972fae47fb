"""The broker resource of Describe/Alter/IncrementalAlterConfigs.

Dynamic broker configs live in memory here (not persisted across restarts):
a per-broker layer (resource name = this node's id) over a cluster-wide
default layer (resource name ""), over server.properties, over the built-in
defaults, which is Kafka's precedence. Only the keys in
DYNAMIC_BROKER_CONFIGS can change at runtime: thread counts through the server's
resize methods, which enforce Kafka's half..double rule, and the connection limits
(max.connections, max.connections.per.ip and its overrides,
max.connection.creation.rate) by handing the acceptors' connection quotas the
effective config, as Kafka's DynamicConnectionQuota does.

Validation failures on the broker resource answer INVALID_REQUEST with the
reason, as Kafka does (ConfigAdminManager.validateBrokerConfigChange wraps
every ConfigException in InvalidRequestException, see KAFKA-13609).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from broker.config import CONFIG_DEFS, BrokerConfig, ConfigError
from broker.config_catalogue import (
    BROKER_CONFIG_TYPES,
    CONNECTION_QUOTA_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    THREAD_COUNT_CONFIGS,
    ConfigSource,
    ConfigType,
)
from broker.errors import KafkaError
from broker.net.socket_server import check_resize
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)

_SENSITIVE = re.compile(r"(password|secret|jaas\.config|keystore\.key$)", re.IGNORECASE)


class Resizable(Protocol):
    """What the broker resource changes on the running server."""

    config: BrokerConfig
    node_id: int

    async def resize_network_threads(self, new_count: int) -> None: ...

    def resize_io_threads(self, new_count: int) -> None: ...

    def update_connection_quotas(self, config: BrokerConfig) -> None: ...


class BrokerConfigs:
    def __init__(self, server: Resizable) -> None:
        self._server = server
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}

    # -- resource names ----------------------------------------------------------------
    def is_cluster_default(self, resource_name: str) -> bool:
        """ "" is the cluster-wide default; anything else must be this node's id."""
        if resource_name == "":
            return True
        try:
            broker_id = int(resource_name)
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Broker id must be an integer, but it is: {resource_name}",
            ) from None
        if broker_id != self._server.node_id:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self._server.node_id} or empty string, "
                f"but received {resource_name}",
            )
        return False

    # -- describe ----------------------------------------------------------------------
    def describe(
        self,
        resource_name: str,
        keys: Iterable[str] | None,
        *,
        include_synonyms: bool,
        include_documentation: bool,
    ) -> list[DescribeConfigsResourceResult]:
        if self.is_cluster_default(resource_name):
            # Kafka lists only the dynamic cluster-wide defaults for the "" resource.
            names = sorted(self.cluster_default)
        else:
            names = sorted(CONFIG_DEFS)
        if keys is not None:
            wanted = set(keys)
            names = [n for n in names if n in wanted]
        return [self._entry(n, include_synonyms, include_documentation) for n in names]

    def _entry(
        self, name: str, include_synonyms: bool, include_documentation: bool
    ) -> DescribeConfigsResourceResult:
        definition = CONFIG_DEFS[name]
        synonyms = self._synonyms(name)
        source = synonyms[0].source
        sensitive = definition.type == "password" or bool(_SENSITIVE.search(name))
        return DescribeConfigsResourceResult(
            name=name,
            value=None if sensitive else synonyms[0].value,
            read_only=name not in DYNAMIC_BROKER_CONFIGS,
            is_default=source == ConfigSource.DEFAULT_CONFIG,
            config_source=source,
            is_sensitive=sensitive,
            synonyms=tuple(
                DescribeConfigsSynonym(
                    name=s.name, value=None if sensitive else s.value, source=s.source
                )
                for s in synonyms
            )
            if include_synonyms
            else (),
            config_type=BROKER_CONFIG_TYPES[definition.type]
            if include_documentation
            else ConfigType.UNKNOWN,
            documentation=definition.doc if include_documentation else None,
        )

    def _synonyms(self, name: str) -> list[DescribeConfigsSynonym]:
        """Every layer that sets `name`, most specific first; the default always last."""
        layers = (
            (self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        )
        synonyms = [
            DescribeConfigsSynonym(name=name, value=layer[name], source=source)
            for layer, source in layers
            if name in layer
        ]
        config = self._server.config
        if config.is_set(name):
            synonyms.append(
                DescribeConfigsSynonym(
                    name=name,
                    value=config.effective().get(name),
                    source=ConfigSource.STATIC_BROKER_CONFIG,
                )
            )
        default = CONFIG_DEFS[name].default
        synonyms.append(
            DescribeConfigsSynonym(
                name=name,
                value=None if default is None else _render(default),
                source=ConfigSource.DEFAULT_CONFIG,
            )
        )
        return synonyms

    def value(self, name: str) -> str | None:
        return self._synonyms(name)[0].value

    # -- alter -------------------------------------------------------------------------
    async def alter(
        self,
        resource_name: str,
        set_: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        replace_all: bool = False,
        validate_only: bool = False,
    ) -> None:
        """Validate every change first, then apply them; nothing changes on failure."""
        layer_is_default = self.is_cluster_default(resource_name)
        deleted = list(delete)
        for name in [*set_, *deleted]:
            if name not in DYNAMIC_BROKER_CONFIGS:
                reason = (
                    "is not a known broker config"
                    if name not in CONFIG_DEFS
                    else "cannot be updated dynamically"
                )
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{name}: {reason}")
        for name, raw in set_.items():
            try:
                CONFIG_DEFS[name].parse(raw)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        layer = self.cluster_default if layer_is_default else self.per_broker
        new_layer = {} if replace_all else dict(layer)
        for name in deleted:
            new_layer.pop(name, None)
        new_layer.update({k: v.strip() for k, v in set_.items()})
        before = {name: self._effective_int(name) for name in THREAD_COUNT_CONFIGS}
        limits_before = {name: self.value(name) for name in CONNECTION_QUOTA_CONFIGS}
        old_layer = dict(layer)
        layer.clear()
        layer.update(new_layer)
        after = {name: self._effective_int(name) for name in THREAD_COUNT_CONFIGS}
        limits_after = {name: self.value(name) for name in CONNECTION_QUOTA_CONFIGS}
        try:
            for name, count in after.items():
                if count != before[name]:
                    check_resize(name, before[name], count)
            quota_config = (
                self._with_dynamic_limits(limits_after) if limits_after != limits_before else None
            )
            if validate_only:
                layer.clear()
                layer.update(old_layer)
                return
            if after["num.network.threads"] != before["num.network.threads"]:
                await self._server.resize_network_threads(after["num.network.threads"])
            if after["num.io.threads"] != before["num.io.threads"]:
                self._server.resize_io_threads(after["num.io.threads"])
            if quota_config is not None:
                self._server.update_connection_quotas(quota_config)
        except ConfigError as exc:
            layer.clear()
            layer.update(old_layer)
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None

    def _with_dynamic_limits(self, limits: Mapping[str, str | None]) -> BrokerConfig:
        """The static config with the effective connection limits over it (validated as a
        whole, e.g. the overrides' syntax: raises ConfigError)."""
        raw = dict(self._server.config.raw)
        for name, value in limits.items():
            if value is None:
                raw.pop(name, None)
            else:
                raw[name] = value
        return BrokerConfig(raw)

    def _effective_int(self, name: str) -> int:
        value = self.value(name)
        return int(value) if value is not None else 0


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


__all__ = ["BrokerConfigs", "Resizable"]
