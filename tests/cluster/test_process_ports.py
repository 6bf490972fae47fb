"""The ports of a cluster's processes: each listener's port + i by default, an explicit
range per listener with `process.listener.ports`, and a plan whose ports collide refused
before any process starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from broker.client.session import ClientSession
from broker.cluster.process_ports import (
    check_bind_ports_distinct,
    check_port_ranges,
    check_process_ports,
    parse_port_ranges,
    process_endpoints,
    process_listener_overrides,
)
from broker.config import BrokerConfig
from broker.config_error import ConfigError
from broker.net.endpoint import Endpoint
from broker.protocol.messages import MetadataRequest
from tests.cluster.test_supervisor import consecutive_free_ports
from tests.integration.broker_harness import start_broker_process, stop_broker_process

INTERNAL = Endpoint("INTERNAL", "PLAINTEXT", "127.0.0.1", 9092)
EXTERNAL = Endpoint("EXTERNAL", "PLAINTEXT", "", 9093)
NAMED = {
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def config(**settings: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in settings.items()})


def test_a_range_is_first_to_last_and_one_port_is_a_range_of_one() -> None:
    assert parse_port_ranges(["external:19092-19095", "INTERNAL:9000"], "k") == {
        "EXTERNAL": range(19092, 19096),
        "INTERNAL": range(9000, 9001),
    }


@pytest.mark.parametrize(
    "entry", ["EXTERNAL", "EXTERNAL:", ":9092", "EXTERNAL:9095-9092", "EXTERNAL:0-3", "X:a-b"]
)
def test_a_malformed_range_is_refused_naming_the_setting(entry: str) -> None:
    with pytest.raises(ConfigError, match=r"process\.listener\.ports"):
        parse_port_ranges([entry], "process.listener.ports")


def test_process_i_takes_the_ith_port_of_a_range_and_port_plus_i_otherwise() -> None:
    ranges = {"EXTERNAL": range(19092, 19095)}
    ports = [[e.port for e in process_endpoints([INTERNAL, EXTERNAL], ranges, i)] for i in range(3)]
    assert ports == [[9092, 19092], [9093, 19093], [9094, 19094]]
    ephemeral = Endpoint("PLAINTEXT", "PLAINTEXT", "", 0)
    assert process_endpoints([ephemeral], {}, 2) == (ephemeral,)


def test_a_range_must_name_a_listener_and_hold_a_port_per_process() -> None:
    with pytest.raises(ConfigError, match="2 port"):
        check_port_ranges({"EXTERNAL": range(1, 3)}, [INTERNAL, EXTERNAL], 3, "k")
    with pytest.raises(ConfigError, match="not a listener"):
        check_port_ranges({"OTHER": range(1, 5)}, [INTERNAL, EXTERNAL], 3, "k")


def test_neighbouring_listener_ports_collide_under_several_processes() -> None:
    with pytest.raises(ConfigError, match="port 9093 would be bound twice"):
        check_bind_ports_distinct([INTERNAL, EXTERNAL], {}, 2)
    check_bind_ports_distinct([INTERNAL, EXTERNAL], {}, 1)
    check_bind_ports_distinct([INTERNAL, EXTERNAL], {"EXTERNAL": range(19092, 19094)}, 2)
    apart = Endpoint("EXTERNAL", "PLAINTEXT", "127.0.0.2", 9093)
    check_bind_ports_distinct([INTERNAL, apart], {}, 2)  # other host: no collision


def test_the_metrics_port_is_refused_where_a_process_binds_it_naming_the_keys() -> None:
    host = {"listeners": "PLAINTEXT://127.0.0.2:9092", "zookeeper.connect": "127.0.0.1:2181"}
    with pytest.raises(ConfigError) as refused:
        check_process_ports(BrokerConfig({**host, "metrics.port": "9093"}), 2)
    assert str(refused.value).startswith("metrics.port: port 9093 would be bound twice")
    assert "PLAINTEXT of process 1" in str(refused.value)
    assert "listeners" in str(refused.value) and "process.listener.ports" in str(refused.value)
    with pytest.raises(ConfigError, match=r"metrics\.port: port 9092"):
        check_process_ports(BrokerConfig({**host, "metrics.port": "9092"}), 1)
    with pytest.raises(ConfigError, match="EXTERNAL of process 0"):
        check_process_ports(
            config(
                listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://:9095",
                process_listener_ports="EXTERNAL:9404-9405",
                metrics_port="9404",
                **_named(),
            ),
            2,
        )
    check_process_ports(BrokerConfig({**host, "metrics.port": "9094"}), 2)  # above them
    check_process_ports(BrokerConfig({**host, "metrics.port": "9093"}), 1)
    check_process_ports(BrokerConfig({**host, "metrics.port": "0"}), 2)  # a free port
    apart = {**host, "listeners": "PLAINTEXT://127.0.0.2:9092,OTHER://127.0.0.3:9404"}
    check_process_ports(
        BrokerConfig({**apart, **NAMED_OTHER, "metrics.port": "9404"}), 2
    )  # bound on 127.0.0.2, the first listener's host


def test_advertised_ports_follow_the_listeners_unless_ranged() -> None:
    base = config(listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://:9095", **_named())
    assert process_listener_overrides(base, 1) == {
        "listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://:9096"
    }
    ranged = config(
        listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://:9095",
        process_advertised_listener_ports="EXTERNAL:29092-29093",
        **_named(),
    )
    assert process_listener_overrides(ranged, 1) == {
        "listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://:9096",
        "advertised.listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://:29093",
    }
    advertised = config(
        listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://:9095",
        advertised_listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://broker.example:443",
        process_advertised_listener_ports="EXTERNAL:443-444",
        **_named(),
    )
    assert process_listener_overrides(advertised, 1)["advertised.listeners"] == (
        "INTERNAL://127.0.0.1:9093,EXTERNAL://broker.example:444"
    )


NAMED_OTHER = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
}


def _named() -> dict[str, str]:
    return {k.replace(".", "_"): v for k, v in NAMED.items()}


def serve_args(data: Path, settings: dict[str, str]) -> list[str]:
    args = [sys.executable, "-m", "broker", "serve"]
    for key, value in {"log.dirs": str(data), "metrics.port": "-1", **settings}.items():
        args += ["--override", f"{key}={value}"]
    return args


def test_a_cluster_whose_listener_ports_collide_is_refused_in_one_line(tmp_path: Path) -> None:
    base = consecutive_free_ports(2)
    settings = {
        **NAMED,
        "process.count": "2",
        "listeners": f"INTERNAL://127.0.0.1:{base},EXTERNAL://127.0.0.1:{base + 1}",
    }
    result = subprocess.run(
        serve_args(tmp_path / "data", settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1
    assert f"port {base + 1} would be bound twice" in errors[0]
    assert "process.listener.ports" in errors[0]


async def test_each_process_binds_and_advertises_its_port_of_an_explicit_range(
    tmp_path: Path,
) -> None:
    base = consecutive_free_ports(4)
    external = range(base + 2, base + 4)
    cluster = start_broker_process(
        tmp_path / "data",
        {
            **NAMED,
            "process.count": "2",
            "num.network.threads": "1",
            "listeners": f"INTERNAL://127.0.0.1:{base},EXTERNAL://127.0.0.1:{base + 1}",
            "process.listener.ports": f"EXTERNAL:{external[0]}-{external[-1]}",
        },
    )
    try:
        for port in external:
            async with await ClientSession.open(f"127.0.0.1:{port}") as session:
                with trio.fail_after(20):
                    metadata = await session.call(MetadataRequest(topics=None))
                assert sorted(b.port for b in metadata.brokers) == list(external)
    finally:
        assert stop_broker_process(cluster) == 0, cluster.log_text()[-4000:]
