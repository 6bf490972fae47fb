"""Broker configuration under Kafka's own key names and server.properties format.

Operators bring Kafka configs and Kafka muscle memory, so keys, defaults,
validation messages and the .properties syntax follow Kafka (spec §8). Values
are kept as the strings the operator wrote, parsed through the key table
(`broker/config/table.py`) when the config is built, so a bad value stops the
broker at start-up rather than at first use; subsystems read the typed settings
groups (`broker/config/settings.py`) built with it.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.config.endpoint import (
    Endpoint,
    parse_listeners,
    parse_protocol_map,
    validate_listener_uniqueness,
)
from broker.config.errors import ConfigError
from broker.config.properties import parse_properties
from broker.config.settings import (
    CleanerSettings,
    ClusterSettings,
    GroupSettings,
    LogSettings,
    NetworkSettings,
    QuotaSettings,
    ReplicationSettings,
    SecuritySettings,
    ServerSettings,
    TransactionSettings,
    build,
    listener_security_settings,
    listener_settings,
)
from broker.config.table import (
    CONFIG_DEFS,
    LISTENER_PREFIX_RE,
    PER_LISTENER_KEYS,
    ConfigDef,
    find_def,
    listener_key,
)
from broker.config.topic_keys import TOPIC_CONFIGS
from broker.config.types import ConfigType, render_value, split_list
from broker.config.validators import parse_ip_overrides

logger = logging.getLogger("broker.config")

HIDDEN = "[hidden]"
_SENSITIVE_RE = re.compile(r"(password|secret|jaas\.config|keystore\.key$)", re.IGNORECASE)


class BrokerConfig:
    """An immutable, validated broker configuration.

    Only the operator's strings are stored; typed values are derived from them,
    so `with_updates` (dynamic config) re-runs exactly the start-up validation.
    """

    __slots__ = (
        "_raw",
        "_values",
        "advertised_listeners",
        "cleaner",
        "cluster",
        "groups",
        "listeners",
        "log",
        "network",
        "quotas",
        "replication",
        "security",
        "server",
        "transactions",
    )

    _raw: dict[str, str]
    _values: dict[str, object]
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    server: ServerSettings
    network: NetworkSettings
    quotas: QuotaSettings
    log: LogSettings
    cleaner: CleanerSettings
    groups: GroupSettings
    transactions: TransactionSettings
    security: SecuritySettings
    cluster: ClusterSettings
    replication: ReplicationSettings

    def __init__(self, raw: Mapping[str, str] | None = None) -> None:
        raw_dict = {k.strip(): v for k, v in (raw or {}).items()}
        values: dict[str, object] = {}
        for name, known in CONFIG_DEFS.items():
            values[name] = known.default
        for key, value in raw_dict.items():
            definition = find_def(key)
            if definition is not None:
                values[key] = definition.parse(value)
        self._raw = raw_dict
        self._values = values
        self._resolve_aliases()
        self.listeners, self.advertised_listeners = self._validate()
        self._build_settings()

    # ---- construction helpers

    def _resolve_aliases(self) -> None:
        values = self._values
        if "broker.id" in self._raw:
            broker_id = values["broker.id"]
            if "node.id" in self._raw and values["node.id"] != broker_id:
                raise ConfigError(
                    f"broker.id: {broker_id} differs from node.id {values['node.id']}; "
                    "set only one of them"
                )
            values["node.id"] = broker_id
        values["broker.id"] = values["node.id"]
        if values["log.dirs"] is None:
            values["log.dirs"] = split_list(str(values["log.dir"]))

    def _validate(self) -> tuple[tuple[Endpoint, ...], tuple[Endpoint, ...]]:
        protocol_map = parse_protocol_map(self.get_str("listener.security.protocol.map"))
        listeners = parse_listeners(self.get_str("listeners"), protocol_map, "listeners")
        if not listeners:
            raise ConfigError("listeners: at least one listener must be configured")
        validate_listener_uniqueness(listeners, "listeners")
        names = {e.listener_name for e in listeners}

        advertised_value = self.get_optional_str("advertised.listeners")
        if advertised_value is None:
            advertised = listeners
        else:
            advertised = parse_listeners(advertised_value, protocol_map, "advertised.listeners")
            validate_listener_uniqueness(advertised, "advertised.listeners", check_ports=False)
            for endpoint in advertised:
                if endpoint.host == "0.0.0.0":
                    raise ConfigError(
                        "advertised.listeners: cannot use the nonroutable meta-address "
                        f"0.0.0.0 ({endpoint.url()}); use a routable IP address"
                    )
                if endpoint.listener_name not in names:
                    raise ConfigError(
                        f"advertised.listeners: listener {endpoint.listener_name} is not "
                        f"one of the listeners ({', '.join(sorted(names))})"
                    )

        explicit_name = self.get_optional_str("inter.broker.listener.name")
        if explicit_name is not None and "security.inter.broker.protocol" in self._raw:
            raise ConfigError(
                "inter.broker.listener.name: only one of inter.broker.listener.name and "
                "security.inter.broker.protocol may be set"
            )
        if explicit_name is not None or "security.inter.broker.protocol" in self._raw:
            key = (
                "inter.broker.listener.name"
                if explicit_name is not None
                else "security.inter.broker.protocol"
            )
            inter = self.inter_broker_listener_name
            if inter not in protocol_map:
                raise ConfigError(f"{key}: no security protocol defined for listener {inter}")
            if inter not in {e.listener_name for e in advertised}:
                raise ConfigError(
                    f"{key}: the inter-broker listener {inter} must be among the "
                    "advertised listeners"
                )
        if self.get_optional_str("zookeeper.connect") is not None:
            self._validate_inter_broker_login(protocol_map, advertised)

        srmb = self.get_int("socket.request.max.bytes")
        qmrb = self.get_int("queued.max.request.bytes")
        if 0 < qmrb < srmb:
            raise ConfigError(
                f"queued.max.request.bytes: must be -1 (a derived bound) or >= "
                f"socket.request.max.bytes ({srmb}), got {qmrb}"
            )
        if (
            self.get_int("max.connections.per.ip") == 0
            and not self.max_connections_per_ip_overrides
        ):
            raise ConfigError(
                "max.connections.per.ip: 0 is only allowed when "
                "max.connections.per.ip.overrides is set"
            )
        idle = self.get_int("connections.max.idle.ms")
        delay = self.get_int("connection.failed.authentication.delay.ms")
        if idle >= 0 and delay >= idle:
            raise ConfigError(
                f"connection.failed.authentication.delay.ms: must be < "
                f"connections.max.idle.ms ({idle}), got {delay}"
            )
        for key in self._raw:
            match = LISTENER_PREFIX_RE.match(key)
            if match and match.group(2) in PER_LISTENER_KEYS:
                listener = match.group(1).upper()
                if listener not in protocol_map and listener not in names:
                    logger.warning("%s: listener %s is not configured; ignored", key, listener)
        return listeners, advertised

    def _validate_inter_broker_login(
        self, protocol_map: Mapping[str, str], advertised: tuple[Endpoint, ...]
    ) -> None:
        """Brokers among hosts connect to each other's inter-broker listener: it must be
        advertised, and where it is SASL its mechanism must be one the listener enables
        (Kafka's KafkaConfig checks the same); the credentials are checked where the
        connections are built (broker/hosts/inter_broker_security.py)."""
        inter = self.inter_broker_listener_name
        if inter not in {e.listener_name for e in advertised}:
            raise ConfigError(
                f"inter.broker.listener.name: the brokers reach each other on listener {inter}"
                f" (security.inter.broker.protocol names it when inter.broker.listener.name"
                " is unset), which must be among the advertised listeners"
            )
        if not protocol_map.get(inter, "").startswith("SASL_"):
            return
        mechanism = self.get_str("sasl.mechanism.inter.broker.protocol").upper()
        enabled_key = self.effective_key(inter, "sasl.enabled.mechanisms")
        enabled = self.get_list(enabled_key)
        if mechanism not in enabled:
            unsupported = " (GSSAPI, Kafka's default, is not supported)" * (mechanism == "GSSAPI")
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol: {mechanism} must be among the "
                f"inter-broker listener {inter}'s {enabled_key} ({', '.join(enabled)})"
                f"{unsupported}"
            )

    def _build_settings(self) -> None:
        value = self.value
        self.server = build(ServerSettings, value)
        self.network = build(
            NetworkSettings,
            value,
            max_connections_per_ip_overrides=self.max_connections_per_ip_overrides,
            inter_broker_listener_name=self.inter_broker_listener_name,
            listener=lambda name: listener_settings(self, name),
        )
        self.quotas = build(QuotaSettings, value)
        self.log = build(
            LogSettings, value, retention_ms=self.log_retention_ms, roll_ms=self.log_roll_ms
        )
        self.cleaner = build(CleanerSettings, value)
        self.groups = build(GroupSettings, value)
        self.transactions = build(TransactionSettings, value)
        self.security = build(
            SecuritySettings, value, listener=lambda name: listener_security_settings(self, name)
        )
        self.cluster = build(ClusterSettings, value)
        self.replication = build(ReplicationSettings, value)

    # ---- typed access (for the table's own code and tests; subsystems read the groups)

    def value(self, key: str) -> object:
        """`key`'s typed value (its default when not given)."""
        return self._value(key)

    def effective_key(self, listener: str, key: str, mechanism: str = "") -> str:
        """The key whose value applies to `listener` (and `mechanism`, when given):
        `listener.name.<l>.<mechanism>.<key>`, then `listener.name.<l>.<key>` (any case
        of the listener name), then `key`, as Kafka's valuesWithPrefixOverride."""
        candidates = []
        if mechanism:
            candidates.append(listener_key(listener, f"{mechanism.lower()}.{key}"))
        candidates.append(listener_key(listener, key))
        for candidate in candidates:
            for raw_key in self._raw:
                if raw_key.lower() == candidate.lower():
                    return raw_key
        return key

    def _value(self, key: str) -> object:
        try:
            return self._values[key]
        except KeyError:
            definition = find_def(key)
            if definition is None:
                raise KeyError(f"unknown config key {key!r}") from None
            return definition.default

    def get_int(self, key: str) -> int:
        value = self._value(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{key}: has no integer value (got {value!r})")
        return value

    def get_optional_int(self, key: str) -> int | None:
        value = self._value(key)
        return None if value is None else self.get_int(key)

    def get_str(self, key: str) -> str:
        value = self._value(key)
        if value is None:
            raise ConfigError(f"{key}: is not set")
        if isinstance(value, list):
            return ",".join(str(v) for v in value)
        return str(value)

    def get_optional_str(self, key: str) -> str | None:
        return None if self._value(key) is None else self.get_str(key)

    def get_bool(self, key: str) -> bool:
        value = self._value(key)
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: has no boolean value (got {value!r})")
        return value

    def get_list(self, key: str) -> list[str]:
        value = self._value(key)
        if value is None:
            return []
        if isinstance(value, list):
            return [str(v) for v in value]
        return split_list(str(value))

    def get_double(self, key: str) -> float:
        value = self._value(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"{key}: has no numeric value (got {value!r})")
        return float(value)

    def listener_int(self, listener_name: str, key: str) -> int:
        """`listener.name.<listener>.<key>` if set (any case of the listener
        name), else the broker-wide value, as Kafka's valuesWithPrefixOverride."""
        prefixed = self.listener_key(listener_name, key)
        if prefixed in self._values:
            return self.get_int(prefixed)
        for raw_key in self._raw:
            if raw_key.lower() == prefixed and raw_key in self._values:
                return self.get_int(raw_key)
        return self.get_int(key)

    @staticmethod
    def listener_key(listener_name: str, key: str) -> str:
        return listener_key(listener_name, key)

    def is_set(self, key: str) -> bool:
        """Whether the operator gave the key explicitly (defaults do not count)."""
        return key in self._raw

    @property
    def raw(self) -> Mapping[str, str]:
        return dict(self._raw)

    # ---- derived values

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dirs(self) -> list[str]:
        return self.get_list("log.dirs")

    @property
    def inter_broker_listener_name(self) -> str:
        explicit = self.get_optional_str("inter.broker.listener.name")
        if explicit is not None:
            return explicit.upper()
        return self.get_str("security.inter.broker.protocol").upper()

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        return parse_ip_overrides(self.get_str("max.connections.per.ip.overrides"))

    @property
    def log_roll_ms(self) -> int:
        roll_ms = self.get_optional_int("log.roll.ms")
        return roll_ms if roll_ms is not None else self.get_int("log.roll.hours") * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        """Kafka's precedence: ms, then minutes, then hours; negative means forever."""
        retention_ms = self.get_optional_int("log.retention.ms")
        if retention_ms is not None:
            return retention_ms
        minutes = self.get_optional_int("log.retention.minutes")
        if minutes is not None:
            return minutes * 60_000
        return self.get_int("log.retention.hours") * 3_600_000

    # ---- copies and reporting

    def with_updates(self, updates: Mapping[str, str]) -> BrokerConfig:
        raw = dict(self._raw)
        raw.update(updates)
        _warn_unknown(updates)
        return BrokerConfig(raw)

    def effective(self) -> dict[str, str]:
        """Every known key with the value in effect plus any unknown keys given,
        secrets masked, sorted by key — what Kafka prints at start-up."""
        result: dict[str, str] = {}
        for name, known in CONFIG_DEFS.items():
            result[name] = _render(self._values.get(name), known)
        for key, value in self._raw.items():
            if key in result:
                continue
            definition = find_def(key)
            if definition is not None:
                result[key] = _render(self._values.get(key), definition)
            else:
                result[key] = HIDDEN if _SENSITIVE_RE.search(key) else value
        return dict(sorted(result.items()))

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v}" for k, v in self.effective().items() if k in self._raw)
        return f"BrokerConfig({given})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BrokerConfig) and self._raw == other._raw

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._raw.items())))


def _render(value: object, definition: ConfigDef) -> str:
    if definition.type == ConfigType.PASSWORD and value is not None:
        return HIDDEN
    return render_value(value)


def _warn_unknown(raw: Mapping[str, str]) -> None:
    for key in raw:
        if find_def(key.strip()) is None:
            logger.warning("%s", unknown_key_warning(key.strip()))


def unknown_key_warning(key: str) -> str:
    """The warning for a key no definition knows, with the likely intended key: a
    typo's nearest known key, or the broker-wide default of a topic key."""
    topic = TOPIC_CONFIGS.get(key)
    if topic is not None and topic.synonyms:
        hint = f"; did you mean {topic.synonyms[0]}? ({key} is a topic config)"
    else:
        suggestion = _closest_key(key)
        hint = f"; did you mean {suggestion}?" if suggestion else ""
    return f"{key}: unknown config key, kept but without effect{hint}"


def _closest_key(key: str) -> str | None:
    match = LISTENER_PREFIX_RE.match(key)
    if match:
        prefix, known = f"listener.name.{match.group(1)}.", PER_LISTENER_KEYS
        key = match.group(2)
    else:
        prefix, known = "", frozenset(CONFIG_DEFS)
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
    return prefix + close[0] if close else None


def load_config(path: str | None, overrides: Sequence[str] = ()) -> BrokerConfig:
    """Read a server.properties file (None: defaults only) and apply `--override
    key=value` strings on top, so the command line wins as in kafka-server-start."""
    raw: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
        raw.update(parse_properties(text))
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{override}: an override must be of the form key=value")
        raw[key.strip()] = value
    _warn_unknown(raw)
    return BrokerConfig(raw)
