"""The typed settings groups read the table's keys: each field names a key of the table
and holds a value of that key's type; per-listener and derived values follow Kafka's
precedence."""

from __future__ import annotations

import attrs
import pytest

from broker.config import CONFIG_DEFS, BrokerConfig
from broker.config.settings import SETTINGS_GROUPS, keys_of
from broker.config.types import ConfigType

_PYTHON_TYPES = {
    ConfigType.INT: int,
    ConfigType.LONG: int,
    ConfigType.DOUBLE: float,
    ConfigType.BOOLEAN: bool,
    ConfigType.STRING: str,
    ConfigType.PASSWORD: str,
    ConfigType.LIST: tuple,
}

GROUPS = ("server", "network", "quotas", "log", "cleaner", "groups", "transactions")


@pytest.mark.parametrize("group", [*GROUPS, "security", "cluster"])
def test_every_field_holds_its_keys_default_with_the_keys_type(group: str) -> None:
    settings = getattr(BrokerConfig({}), group)
    keys = keys_of(type(settings))
    assert keys, group
    for field, key in keys.items():
        definition = CONFIG_DEFS[key]
        value = getattr(settings, field)
        if definition.default is None:
            assert value is None, key
        else:
            assert isinstance(value, _PYTHON_TYPES[definition.type]), key


def test_every_group_is_frozen_and_names_only_known_keys() -> None:
    for group in SETTINGS_GROUPS:
        assert attrs.has(group) and group.__setattr__ is not object.__setattr__
        assert all(key in CONFIG_DEFS for key in keys_of(group).values())


def test_a_given_value_reaches_its_field() -> None:
    config = BrokerConfig(
        {
            "num.io.threads": " 5 ",
            "log.cleaner.worker": "thread",
            "group.consumer.assignors": "range",
            "log.retention.minutes": "2",
            "log.roll.hours": "1",
            "max.connections.per.ip.overrides": "127.0.0.1:3",
        }
    )
    assert config.network.num_io_threads == 5
    assert config.cleaner.worker == "thread"
    assert config.groups.consumer_assignors == ("range",)
    assert config.log.retention_ms == 120_000
    assert config.log.roll_ms == 3_600_000
    assert config.network.max_connections_per_ip_overrides == {"127.0.0.1": 3}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.network.num_io_threads = 6  # type: ignore[misc]


def test_a_listeners_override_wins_over_the_broker_wide_value_in_any_case() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "max.connections": "50",
            "listener.name.INTERNAL.max.connections": "7",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": "x required;",
            "listener.name.internal.plain.connections.max.reauth.ms": "1000",
        }
    )
    assert config.network.listener("INTERNAL").max_connections == 7
    assert config.network.listener("PLAINTEXT").max_connections == 50
    internal = config.security.listener("INTERNAL")
    assert internal.sasl_enabled_mechanisms == (
        "listener.name.internal.sasl.enabled.mechanisms",
        ("PLAIN",),
    )
    assert internal.plain_jaas_config.key == "listener.name.internal.plain.sasl.jaas.config"
    assert internal.connections_max_reauth_ms == {"PLAIN": 1000}
    plaintext = config.security.listener("PLAINTEXT")
    assert plaintext.plain_jaas_config.value is None, "only a listener's JAAS config counts"
    assert plaintext.ssl_enabled_protocols == ("ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3"))
