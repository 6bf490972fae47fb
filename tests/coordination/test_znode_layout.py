"""Kafka's znode documents and `zookeeper.connect`, without a server."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import BrokerConfig, ConfigError
from broker.coordination.broker_registration import (
    BrokerEndpoint,
    BrokerRegistration,
    MalformedZnode,
)
from broker.coordination.controller_election import controller_id_of, controller_json
from broker.coordination.kazoo_store import ZooKeeperSettings
from broker.coordination.store import Versioned


@pytest.mark.parametrize(
    ("connect", "hosts", "chroot"),
    [
        ("127.0.0.1:2181", "127.0.0.1:2181", ""),
        ("127.0.0.1:2181/", "127.0.0.1:2181", ""),
        ("a:1,b:2/kafka", "a:1,b:2", "/kafka"),
        ("a:1/kafka/prod/", "a:1", "/kafka/prod"),
    ],
)
def test_zookeeper_connect_names_hosts_and_an_optional_chroot(
    connect: str, hosts: str, chroot: str
) -> None:
    settings = ZooKeeperSettings(connect)
    assert (settings.hosts, settings.chroot) == (hosts, chroot)


@pytest.mark.parametrize("value", ["localhost", "a:1,b", "a:0", "a:99999/x", ":2181"])
def test_a_malformed_zookeeper_connect_is_a_config_error_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^zookeeper\.connect: "):
        BrokerConfig({"zookeeper.connect": value}).get_optional_str("zookeeper.connect")


def test_zookeeper_is_off_by_default_with_kafkas_session_timeout() -> None:
    config = BrokerConfig({})
    assert config.get_optional_str("zookeeper.connect") is None
    assert config.get_int("zookeeper.session.timeout.ms") == 18000
    assert config.get_optional_int("zookeeper.connection.timeout.ms") is None
    assert config.get_optional_str("broker.rack") is None


def test_a_registration_without_plaintext_or_rack_follows_kafka() -> None:
    registration = BrokerRegistration(
        5, (BrokerEndpoint("SSL", "SSL", "::1", 9093),), timestamp_ms=1700000000000
    )
    document = json.loads(registration.to_json())
    assert document == {
        "version": 4,
        "host": None,
        "port": -1,
        "endpoints": ["SSL://[::1]:9093"],
        "listener_security_protocol_map": {"SSL": "SSL"},
        "jmx_port": -1,
        "timestamp": "1700000000000",
    }
    assert BrokerRegistration.from_json(5, registration.to_json()) == registration


def test_the_controller_znode_is_kafkas_json() -> None:
    data = controller_json(3, 1700000000000)
    assert json.loads(data) == {"version": 1, "brokerid": 3, "timestamp": "1700000000000"}
    assert controller_id_of(Versioned(data, 0)) == 3
    assert controller_id_of(None) == -1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
registration_like = st.fixed_dictionaries(
    {},
    optional={
        "endpoints": json_values | st.lists(st.text(max_size=30), max_size=3),
        "listener_security_protocol_map": json_values,
        "rack": json_values,
        "timestamp": json_values,
    },
)


@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_in_a_registration_parse_or_are_refused_as_malformed(data: bytes) -> None:
    try:
        BrokerRegistration.from_json(1, data)
    except MalformedZnode as exc:
        assert str(exc) == "/brokers/ids/1: not a broker registration"


@given(registration_like)
def test_a_registration_like_document_parses_or_is_refused_as_malformed(
    document: dict[str, object],
) -> None:
    try:
        parsed = BrokerRegistration.from_json(1, json.dumps(document).encode())
    except MalformedZnode:
        return
    assert parsed.rack is None or isinstance(parsed.rack, str)
    assert all(isinstance(e.port, int) for e in parsed.endpoints)


@given(st.binary(max_size=100))
def test_any_bytes_in_the_controller_znode_give_an_id_or_none(data: bytes) -> None:
    controller_id = controller_id_of(Versioned(data, 0))
    assert isinstance(controller_id, int)
