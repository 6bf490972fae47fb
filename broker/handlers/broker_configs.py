"""The broker resource of Describe/Alter/IncrementalAlterConfigs.

Dynamic broker configs are layered as Kafka layers them: a per-broker layer
(resource name = this node's id) over a cluster-wide default layer (resource
name ""), over server.properties, over the built-in defaults. Kafka keeps the
dynamic layers in its metadata log; here they are stored in
`__broker_configs.json` in the first log dir (broker/dynamic_broker_config_store.py)
before they take effect, so they survive a restart (loaded before the broker
serves: the network and handler pool start with them) and reach every process of
a cluster (each follows the file and applies the default layer and its own node's
layer; see broker/cluster/member.py). A change that cannot be stored is refused,
never kept in memory only; a password would be refused rather than written in
plain text (none of the runtime keys is one). Only the keys whose dynamic mode in
the key table (broker/config/table.py) is not read-only can change at runtime, a
per-broker key only on this node's resource: thread counts through the server's
resize methods, which enforce Kafka's half..double rule, and the connection limits
(max.connections, max.connections.per.ip and its overrides,
max.connection.creation.rate) by handing the acceptors' connection quotas the
effective config, as Kafka's DynamicConnectionQuota does.

Validation failures on the broker resource answer INVALID_REQUEST with the
reason, as Kafka does (ConfigAdminManager.validateBrokerConfigChange wraps
every ConfigException in InvalidRequestException, see KAFKA-13609).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

import trio
import trio_util

from broker.config import CONFIG_DEFS, BrokerConfig, ConfigError, DynamicMode
from broker.config.table import (
    CONNECTION_QUOTA_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    THREAD_COUNT_CONFIGS,
)
from broker.config.types import ConfigSource, ConfigType, render_value
from broker.dynamic_broker_config_store import (
    DynamicBrokerConfigStore,
    LayerChange,
    StoredBrokerConfigs,
    apply_change,
    is_sensitive,
)
from broker.errors import KafkaError
from broker.net.socket_server import check_resize
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)

log = logging.getLogger(__name__)


class Resizable(Protocol):
    """What the broker resource changes on the running server."""

    config: BrokerConfig
    node_id: int

    async def resize_network_threads(self, new_count: int) -> None: ...

    def resize_io_threads(self, new_count: int) -> None: ...

    def update_connection_quotas(self, config: BrokerConfig) -> None: ...


class BrokerConfigs:
    """The dynamic layers of this node, kept in `store` and loaded from it at once (a
    stored file that is not ours stops the broker at startup: OSError or ValueError)."""

    def __init__(self, server: Resizable, store: DynamicBrokerConfigStore) -> None:
        self._server = server
        self._store = store
        # One change at a time in this process: validated, stored and applied together.
        self._lock = trio.Lock()
        stored = store.load()
        self.per_broker: dict[str, str] = dict(stored.for_node(server.node_id))
        self.cluster_default: dict[str, str] = dict(stored.cluster_default)
        # What the pools run: a stored count that could not take effect is not running.
        self._threads = {name: self._effective_int(name) for name in THREAD_COUNT_CONFIGS}
        # Counts the dynamic layers applied, so that what reads a key at runtime (the
        # replication throttles) can wait for the next change instead of polling.
        self.applied = trio_util.AsyncValue(0)

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
        sensitive = is_sensitive(name)
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
            config_type=definition.type if include_documentation else ConfigType.UNKNOWN,
            documentation=definition.doc if include_documentation else None,
        )

    def _synonyms(self, name: str) -> list[DescribeConfigsSynonym]:
        """Every layer that sets `name`, most specific first; the default always last."""
        layers = (
            (self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        )
        return [
            *(
                DescribeConfigsSynonym(name=name, value=layer[name], source=source)
                for layer, source in layers
                if name in layer
            ),
            *self._static_synonyms(name),
        ]

    def _static_synonyms(self, name: str) -> list[DescribeConfigsSynonym]:
        """server.properties (when it sets `name`), then the built-in default."""
        synonyms = []
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
                value=None if default is None else render_value(default),
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
        """Validate every change first, store it, then apply it; nothing changes on failure.

        The change is written to the stored layers as they are on disk (under the file's
        lock), so what other processes stored meanwhile is kept and applied here too."""
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
            if layer_is_default and CONFIG_DEFS[name].dynamic == DynamicMode.PER_BROKER:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"{name}: can only be set per broker, not as the cluster-wide default",
                )
            if is_sensitive(name):
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"{name}: a password is not stored in plain text, "
                    "so it cannot be changed dynamically",
                )
        for name, raw in set_.items():
            try:
                CONFIG_DEFS[name].parse(raw)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        change = LayerChange(
            None if layer_is_default else self._server.node_id,
            {k: v.strip() for k, v in set_.items()},
            tuple(deleted),
            replace_all,
        )
        async with self._lock:
            try:
                self._check_applicable(apply_change(self._stored_here(), change))
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
            if validate_only:
                return
            try:
                stored = await self._store.update(change)
            except (OSError, ValueError) as exc:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store the broker config change: {exc}"
                ) from exc
            await self._apply(stored)

    @property
    def store_path(self) -> Path:
        """The file another process may change: followed in a cluster."""
        return self._store.path

    async def reload(self) -> None:
        """Take the layers as the store holds them now (another process changed them):
        the cluster default and this node's own; a value that cannot take effect is
        logged and the rest still applies.

        Read under the same lock as `alter`: a file read before one of our own changes
        and applied after it would undo that change here until the next reload (a
        describe right after an alter saw none of it)."""
        async with self._lock:
            await self._apply(await self._store.read())

    def startup_config(self) -> BrokerConfig:
        """The static config with the stored dynamic values over it: what the network
        and the handler pool start with, so stored thread counts and connection limits
        are in effect from the first connection (no half..double rule at startup)."""
        try:
            return self._effective_config(DYNAMIC_BROKER_CONFIGS)
        except ConfigError as exc:
            log.error("stored dynamic broker configs not in effect at startup: %s", exc)
            static = self._server.config
            self._threads = {
                "num.network.threads": static.network.num_network_threads,
                "num.io.threads": static.network.num_io_threads,
            }
            return static

    def _stored_here(self) -> StoredBrokerConfigs:
        return StoredBrokerConfigs(self.cluster_default, {self._server.node_id: self.per_broker})

    def _check_applicable(self, proposed: StoredBrokerConfigs) -> None:
        """What `proposed` would change here must be possible: thread counts within
        Kafka's half..double rule, the connection limits valid as a whole. Raises
        ConfigError."""
        own = proposed.for_node(self._server.node_id)
        for name in THREAD_COUNT_CONFIGS:
            before = self._threads[name]
            after = _int(self._value_in(name, own, proposed.cluster_default))
            if after != before:
                check_resize(name, before, after)
        limits = {
            name: self._value_in(name, own, proposed.cluster_default)
            for name in CONNECTION_QUOTA_CONFIGS
        }
        if limits != {name: self.value(name) for name in CONNECTION_QUOTA_CONFIGS}:
            self._with_values(limits)

    async def _apply(self, stored: StoredBrokerConfigs) -> None:
        """Make `stored` the layers here and put what changed into effect. A value that
        cannot take effect is logged and the rest still applies: a process never stops
        over a change another one stored."""
        limits_before = {name: self.value(name) for name in CONNECTION_QUOTA_CONFIGS}
        self.cluster_default = dict(stored.cluster_default)
        self.per_broker = dict(stored.for_node(self._server.node_id))
        threads_after = {name: self._effective_int(name) for name in THREAD_COUNT_CONFIGS}
        limits_after = {name: self.value(name) for name in CONNECTION_QUOTA_CONFIGS}
        for name in ("num.network.threads", "num.io.threads"):
            before, after = self._threads[name], threads_after[name]
            if after == before:
                continue
            try:
                check_resize(name, before, after)
                if name == "num.network.threads":
                    await self._server.resize_network_threads(after)
                else:
                    self._server.resize_io_threads(after)
                self._threads[name] = after
            except ConfigError as exc:
                log.error("dynamic broker config not applied: %s", exc)
        try:
            if limits_after != limits_before:
                self._server.update_connection_quotas(self._with_values(limits_after))
        except ConfigError as exc:
            log.error("dynamic connection limits not applied: %s", exc)
        self.applied.value += 1

    def _value_in(
        self, name: str, own: Mapping[str, str], default: Mapping[str, str]
    ) -> str | None:
        """`name`'s effective value were `own` and `default` the dynamic layers."""
        if name in own:
            return own[name]
        if name in default:
            return default[name]
        return self._static_synonyms(name)[0].value

    def _effective_config(self, names: Iterable[str]) -> BrokerConfig:
        return self._with_values({name: self.value(name) for name in names})

    def _with_values(self, values: Mapping[str, str | None]) -> BrokerConfig:
        """The static config with `values` over it (validated as a whole, e.g. the
        overrides' syntax: raises ConfigError)."""
        raw = dict(self._server.config.raw)
        for name, value in values.items():
            if value is None:
                raw.pop(name, None)
            else:
                raw[name] = value
        return BrokerConfig(raw)

    def _effective_int(self, name: str) -> int:
        return _int(self.value(name))


def _int(value: str | None) -> int:
    return int(value) if value is not None else 0


__all__ = ["BrokerConfigs", "Resizable"]
