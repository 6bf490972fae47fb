"""The key table is the single source: every default is valid, every type's values
survive a trip through their string form, and the broker resource accepts exactly the
keys the table marks dynamic."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import CONFIG_DEFS, DYNAMIC_BROKER_CONFIGS, ConfigError, DynamicMode
from broker.config.table import TOPIC_SYNONYMS, ConfigDef
from broker.config.topic_keys import TOPIC_CONFIGS
from broker.config.types import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    ConfigType,
    parse_value,
    render_value,
)
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore
from broker.errors import KafkaError
from broker.handlers.broker_configs import BrokerConfigs
from broker.protocol.error_codes import ErrorCode
from tests.handlers.test_handler_logic import FakeServer

_ITEM = st.text(st.characters(codec="utf-8", exclude_characters=","), min_size=1).filter(
    lambda s: s == s.strip() and s != ""
)
_TEXT = st.text(st.characters(codec="utf-8")).filter(lambda s: s == s.strip())


def values_of(type_: ConfigType) -> st.SearchStrategy[object]:
    if type_ == ConfigType.INT:
        return st.integers(INT_MIN, INT_MAX)
    if type_ == ConfigType.LONG:
        return st.integers(LONG_MIN, LONG_MAX)
    if type_ == ConfigType.DOUBLE:
        return st.floats(allow_nan=False)
    if type_ == ConfigType.BOOLEAN:
        return st.booleans()
    if type_ == ConfigType.LIST:
        return st.lists(_ITEM, max_size=5)
    return _TEXT


@pytest.mark.parametrize("name", sorted(CONFIG_DEFS))
def test_every_default_passes_its_own_validator_and_reads_back_from_its_string(
    name: str,
) -> None:
    definition = CONFIG_DEFS[name]
    definition.validate(definition.default)
    if definition.default is not None:
        assert definition.parse(render_value(definition.default)) == definition.default


@settings(max_examples=300)
@given(st.data())
def test_a_value_of_any_type_survives_its_string_form(data: st.DataObject) -> None:
    type_ = data.draw(st.sampled_from(sorted({d.type for d in CONFIG_DEFS.values()})), label="type")
    value = data.draw(values_of(type_), label="value")
    assert parse_value(type_, render_value(value)) == value


@settings(max_examples=300)
@given(st.sampled_from(sorted(CONFIG_DEFS)), st.data())
def test_a_value_a_key_accepts_reads_back_the_same_from_its_string(
    name: str, data: st.DataObject
) -> None:
    definition = CONFIG_DEFS[name]
    value = data.draw(values_of(definition.type), label="value")
    try:
        definition.validate(value)
    except ConfigError as exc:
        assert str(exc).startswith(f"{name}: ")
        return
    assert definition.parse(render_value(value)) == value


def test_a_bad_value_is_refused_with_the_key_first() -> None:
    with pytest.raises(ConfigError, match=r"^num\.io\.threads: expected an integer"):
        CONFIG_DEFS["num.io.threads"].parse("many")
    with pytest.raises(ConfigError, match=r"^num\.io\.threads: must be >= 1, got 0"):
        CONFIG_DEFS["num.io.threads"].parse("0")


def test_the_topic_keys_broker_synonyms_come_from_the_table_in_kafkas_order() -> None:
    assert TOPIC_CONFIGS["retention.ms"].synonyms == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert TOPIC_CONFIGS["segment.ms"].synonyms == ("log.roll.ms", "log.roll.hours")
    for topic, synonyms in TOPIC_SYNONYMS.items():
        assert topic in TOPIC_CONFIGS, topic
        assert TOPIC_CONFIGS[topic].synonyms == synonyms
        assert all(CONFIG_DEFS[s].topic == topic for s in synonyms)


def test_the_dynamic_set_is_the_tables_non_read_only_keys() -> None:
    assert {
        name for name, d in CONFIG_DEFS.items() if d.dynamic != DynamicMode.READ_ONLY
    } == DYNAMIC_BROKER_CONFIGS
    assert {
        "num.network.threads",
        "num.io.threads",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
    } == DYNAMIC_BROKER_CONFIGS


@pytest.mark.parametrize("resource", ["", "1"])
async def test_the_broker_resource_accepts_every_dynamic_key_and_refuses_the_others(
    tmp_path: Path, resource: str
) -> None:
    configs = BrokerConfigs(FakeServer(), DynamicBrokerConfigStore(tmp_path))
    for name, definition in sorted(CONFIG_DEFS.items()):
        value = configs.value(name)
        change = {name: "1" if value is None else value}
        if definition.is_dynamic:
            await configs.alter(resource, change, validate_only=True)
            continue
        with pytest.raises(KafkaError) as refused:
            await configs.alter(resource, change, validate_only=True)
        assert refused.value.error_code == ErrorCode.INVALID_REQUEST
        assert str(refused.value).endswith(f"{name}: cannot be updated dynamically"), name
    with pytest.raises(KafkaError, match="is not a known broker config"):
        await configs.alter(resource, {"num.io.thread": "4"}, validate_only=True)
    assert not (tmp_path / "__broker_configs.json").exists()


async def test_a_per_broker_key_is_refused_as_a_cluster_wide_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_broker = ConfigDef(
        "max.connections",
        ConfigType.INT,
        INT_MAX,
        "doc",
        dynamic=DynamicMode.PER_BROKER,
    )
    monkeypatch.setitem(CONFIG_DEFS, "max.connections", per_broker)
    configs = BrokerConfigs(FakeServer(), DynamicBrokerConfigStore(tmp_path))
    with pytest.raises(KafkaError, match="can only be set per broker"):
        await configs.alter("", {"max.connections": "10"}, validate_only=True)
    await configs.alter("1", {"max.connections": "10"}, validate_only=True)
