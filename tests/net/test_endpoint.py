"""Listener endpoint parsing as Kafka accepts it."""

from __future__ import annotations

import pytest

from broker.config import ConfigError
from broker.net.endpoint import Endpoint, parse_listeners, parse_protocol_map

DEFAULT_MAP = parse_protocol_map("PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SASL_PLAINTEXT")


def test_names_are_upper_cased_and_protocols_looked_up() -> None:
    assert parse_listeners("plaintext://host:9092, internal://:9093", DEFAULT_MAP) == (
        Endpoint("PLAINTEXT", "PLAINTEXT", "host", 9092),
        Endpoint("INTERNAL", "SASL_PLAINTEXT", "", 9093),
    )


def test_ipv6_hosts_go_in_brackets() -> None:
    (endpoint,) = parse_listeners("SSL://[::1]:9093", DEFAULT_MAP)
    assert endpoint.host == "::1"
    assert endpoint.url() == "SSL://[::1]:9093"


def test_empty_host_is_the_wildcard_and_port_zero_is_allowed() -> None:
    (endpoint,) = parse_listeners("PLAINTEXT://:0", DEFAULT_MAP)
    assert endpoint.is_wildcard
    assert endpoint.port == 0
    assert endpoint.url() == "PLAINTEXT://:0"


@pytest.mark.parametrize(
    "value", ["PLAINTEXT://host", "host:9092", "PLAINTEXT://ho st:1", "PLAINTEXT://h:70000"]
)
def test_malformed_listeners_are_rejected(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^listeners: "):
        parse_listeners(value, DEFAULT_MAP)


def test_empty_entries_are_skipped() -> None:
    assert len(parse_listeners(" ,PLAINTEXT://:1,, ", DEFAULT_MAP)) == 1


def test_protocol_map_upper_cases_names_and_checks_protocols() -> None:
    assert parse_protocol_map("client:ssl") == {"CLIENT": "SSL"}
    with pytest.raises(ConfigError, match="unknown security protocol"):
        parse_protocol_map("CLIENT:TLS")
    with pytest.raises(ConfigError, match="NAME:PROTOCOL"):
        parse_protocol_map("CLIENT")
    with pytest.raises(ConfigError, match="more than once"):
        parse_protocol_map("A:SSL,a:SSL")
