"""Bootstrap lists: `broker client --bootstrap-server` and the pipeline's
`kafka.bootstrap.servers` read the same forms with the same parser (names, IPv4, IPv6
bare or bracketed, Kafka's 9092 when no port is given)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.client.bootstrap_servers import (
    DEFAULT_PORT,
    BootstrapServersError,
    parse_bootstrap_servers,
)
from broker.client.session import ClientError, parse_bootstrap
from broker.pipeline.kafka_client import parse_bootstrap as parse_pipeline_bootstrap

Server = tuple[str, tuple[str, int]]
"""(as written in a list, the address it means)."""

names = st.from_regex(r"[a-z][a-z0-9-]{0,15}(\.[a-z][a-z0-9-]{0,15}){0,2}", fullmatch=True)
ports = st.none() | st.integers(0, 65535)


@st.composite
def servers(draw: st.DrawFn) -> Server:
    port = draw(ports)
    expected_port = DEFAULT_PORT if port is None else port
    suffix = "" if port is None else f":{port}"
    v6 = draw(st.ip_addresses(v=6))
    host = draw(st.one_of(names, st.ip_addresses(v=4).map(str), st.just(str(v6))))
    if host != str(v6):
        return f"{host}{suffix}", (host, expected_port)
    bare = port is None and draw(st.booleans())  # `::1` means [::1]:9092
    return (host if bare else f"[{host}]{suffix}"), (host, expected_port)


server_lists = st.lists(servers(), min_size=1, max_size=4)
spaces = st.sampled_from(["", " ", "  "])


@given(server_lists, spaces)
def test_every_host_and_port_form_is_read_as_its_address(listed: list[Server], space: str) -> None:
    text = f",{space}".join(written for written, _ in listed)
    expected = [address for _, address in listed]
    assert parse_bootstrap_servers(text, "servers") == expected


@given(server_lists)
def test_the_pipeline_reads_a_bootstrap_list_as_the_client_does(listed: list[Server]) -> None:
    text = ",".join(written for written, _ in listed)
    assert parse_pipeline_bootstrap(text) == parse_bootstrap(text)


def test_a_host_alone_is_kafkas_default_port_in_the_pipeline() -> None:
    assert parse_pipeline_bootstrap("localhost") == [("localhost", 9092)]
    assert parse_pipeline_bootstrap("[::1]:9093, ::1") == [("::1", 9093), ("::1", 9092)]


@given(
    st.one_of(names, st.ip_addresses(v=4).map(str)),
    st.one_of(st.integers(65536, 10**6).map(str), st.from_regex(r"[a-z]{1,5}", fullmatch=True)),
)
def test_a_port_that_is_not_a_port_number_names_the_setting(host: str, port: str) -> None:
    with pytest.raises(ValueError, match=r"^bad kafka\.bootstrap\.servers .*HOST\[:PORT\]"):
        parse_pipeline_bootstrap(f"{host}:{port}")
    with pytest.raises(ClientError, match=r"^bad --bootstrap-server "):
        parse_bootstrap(f"{host}:{port}")


@pytest.mark.parametrize("text", ["", " , ,"])
def test_an_empty_list_is_an_error(text: str) -> None:
    with pytest.raises(BootstrapServersError):
        parse_pipeline_bootstrap(text)


def test_bracketed_addresses_are_ipv6_literals() -> None:
    ((host, port),) = parse_bootstrap_servers("[fe80::1]:19092", "servers")
    assert ipaddress.ip_address(host).version == 6
    assert port == 19092
