"""Broker configuration: Kafka's .properties syntax, names, defaults and validation."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import (
    CONFIG_DEFS,
    BrokerConfig,
    ConfigError,
    escape_properties_text,
    load_config,
    parse_properties,
)
from broker.net.endpoint import Endpoint

REPO = Path(__file__).resolve().parent.parent


def cfg(**raw: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in raw.items()})


def make(raw: dict[str, str]) -> BrokerConfig:
    return BrokerConfig(raw)


# ---------------------------------------------------------------- .properties syntax


def test_all_three_separators_are_accepted() -> None:
    assert parse_properties("a=1\nb: 2\nc 3\n") == {"a": "1", "b": "2", "c": "3"}


def test_hash_and_bang_lines_are_comments() -> None:
    assert parse_properties("# x=1\n  ! y=2\nz=3") == {"z": "3"}


def test_whitespace_around_key_and_separator_is_ignored() -> None:
    assert parse_properties("   key   =   value") == {"key": "value"}


def test_blank_lines_are_ignored_and_later_duplicates_win() -> None:
    assert parse_properties("\n\na=1\n\n\na=2\n") == {"a": "2"}


def test_backslash_continues_a_line_dropping_leading_whitespace() -> None:
    text = "listeners=PLAINTEXT://:9092,\\\n    INTERNAL://:9093\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://:9092,INTERNAL://:9093"}


def test_an_even_number_of_trailing_backslashes_is_a_literal_backslash() -> None:
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}


def test_comment_lines_do_not_continue() -> None:
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_escapes_are_decoded() -> None:
    assert parse_properties(r"k\ ey\=x=t\tn\nu\u00e9\\z") == {"k ey=x": "t\tn\nué\\z"}


def test_a_malformed_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="uxxxx"):
        parse_properties(r"a=\u12")


def test_crlf_and_cr_line_endings_are_accepted() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_a_key_without_a_value_has_the_empty_value() -> None:
    assert parse_properties("lonely\nother=") == {"lonely": "", "other": ""}


def test_value_may_contain_separators() -> None:
    assert parse_properties("listeners=PLAINTEXT://h:1") == {"listeners": "PLAINTEXT://h:1"}


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)


@given(st.dictionaries(_text.filter(lambda s: s != ""), _text, max_size=5))
def test_escaped_keys_and_values_round_trip(entries: dict[str, str]) -> None:
    text = "\n".join(
        f"{escape_properties_text(k, True)}={escape_properties_text(v, False)}"
        for k, v in entries.items()
    )
    assert parse_properties(text) == entries


# ---------------------------------------------------------------- defaults and typed access


def test_defaults_match_kafka() -> None:
    c = BrokerConfig()
    assert c.get_int("num.network.threads") == 3
    assert c.get_int("num.io.threads") == 8
    assert c.get_int("queued.max.requests") == 500
    assert c.get_int("queued.max.request.bytes") == -1
    assert c.get_int("socket.request.max.bytes") == 104857600
    assert c.get_int("socket.send.buffer.bytes") == 102400
    assert c.get_int("socket.receive.buffer.bytes") == 102400
    assert c.get_int("socket.listen.backlog.size") == 50
    assert c.get_int("max.connections") == 2147483647
    assert c.get_int("max.connection.creation.rate") == 2147483647
    assert c.get_int("max.connections.per.ip") == 2147483647
    assert c.get_str("max.connections.per.ip.overrides") == ""
    assert c.get_int("connections.max.idle.ms") == 600000
    assert c.get_int("quota.window.size.seconds") == 1
    assert c.get_int("quota.window.num") == 11
    assert c.get_int("message.max.bytes") == 1048588
    assert c.get_int("log.segment.bytes") == 1073741824
    assert c.get_int("log.flush.interval.messages") == 2**63 - 1
    assert c.get_optional_str("log.flush.interval.ms") is None
    assert c.get_bool("auto.create.topics.enable") is True
    assert c.get_int("group.initial.rebalance.delay.ms") == 3000
    assert c.get_int("offsets.retention.minutes") == 10080
    assert c.get_int("broker.shutdown.timeout.ms") == 30000
    assert c.get_int("metrics.port") == 9404
    assert c.node_id == 1
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.listeners == (Endpoint("PLAINTEXT", "PLAINTEXT", "", 9092),)
    assert c.advertised_listeners == c.listeners
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_every_definition_has_a_valid_default() -> None:
    c = BrokerConfig()
    for name, definition in CONFIG_DEFS.items():
        if definition.default is not None:
            definition.validate(definition.default)
        assert name in c.effective()


def test_typed_values_are_trimmed() -> None:
    assert cfg(num_io_threads=" 4  ").get_int("num.io.threads") == 4


def test_booleans_are_case_insensitive() -> None:
    assert (
        make({"auto.create.topics.enable": "FALSE"}).get_bool("auto.create.topics.enable") is False
    )


def test_list_values_are_split_and_trimmed() -> None:
    assert make({"log.dirs": " /a , /b ,,"}).log_dirs == ["/a", "/b"]


def test_log_dir_is_used_when_log_dirs_is_unset() -> None:
    assert make({"log.dir": "/x"}).log_dirs == ["/x"]
    assert make({"log.dir": "/x", "log.dirs": "/y"}).log_dirs == ["/y"]


def test_broker_id_is_an_alias_of_node_id() -> None:
    assert make({"broker.id": "7"}).node_id == 7
    assert make({"node.id": "7"}).get_int("broker.id") == 7


def test_conflicting_broker_id_and_node_id_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"^broker\.id"):
        make({"broker.id": "1", "node.id": "2"})


def test_retention_precedence_is_ms_then_minutes_then_hours() -> None:
    assert BrokerConfig().log_retention_ms == 168 * 3_600_000
    assert make({"log.retention.minutes": "2"}).log_retention_ms == 120_000
    assert make({"log.retention.minutes": "2", "log.retention.ms": "5"}).log_retention_ms == 5
    assert make({"log.roll.hours": "1"}).log_roll_ms == 3_600_000


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.network.threads", "0"),
        ("num.io.threads", "0"),
        ("queued.max.requests", "0"),
        ("socket.request.max.bytes", "-1"),
        ("socket.listen.backlog.size", "0"),
        ("max.connections", "-1"),
        ("quota.window.num", "0"),
        ("num.partitions", "0"),
        ("num.io.threads", "many"),
        ("num.io.threads", "2147483648"),
        ("auto.create.topics.enable", "yes"),
        ("security.inter.broker.protocol", "TLS"),
        ("compression.type", "brotli"),
        ("metrics.port", "70000"),
    ],
)
def test_invalid_values_are_rejected_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(key) + ":"):
        make({key: value})


def test_negative_socket_request_max_bytes_is_rejected_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"^socket\.request\.max\.bytes: must be >= 1"):
        make({"socket.request.max.bytes": "-5"})


def test_queued_max_request_bytes_below_the_request_size_limit_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"^queued\.max\.request\.bytes"):
        make({"queued.max.request.bytes": "1000", "socket.request.max.bytes": "2000"})
    c = make({"queued.max.request.bytes": "2000", "socket.request.max.bytes": "2000"})
    assert c.get_int("queued.max.request.bytes") == 2000


def test_zero_max_connections_per_ip_needs_overrides() -> None:
    with pytest.raises(ConfigError, match=r"^max\.connections\.per\.ip:"):
        make({"max.connections.per.ip": "0"})
    c = make({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "10.0.0.1:5"})
    assert c.max_connections_per_ip_overrides == {"10.0.0.1": 5}


@pytest.mark.parametrize("value", ["10.0.0.1", "10.0.0.1:x", ":5", "h:-1"])
def test_malformed_per_ip_overrides_are_rejected(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^max\.connections\.per\.ip\.overrides:"):
        make({"max.connections.per.ip.overrides": value})


def test_per_ip_overrides_accept_ipv6_and_hosts() -> None:
    c = make({"max.connections.per.ip.overrides": "::1:3, localhost:4"})
    assert c.max_connections_per_ip_overrides == {"::1": 3, "localhost": 4}


def test_failed_authentication_delay_must_be_below_idle_timeout() -> None:
    with pytest.raises(ConfigError, match=r"^connection\.failed\.authentication\.delay\.ms"):
        make({"connections.max.idle.ms": "50"})
    make({"connections.max.idle.ms": "-1"})


def test_listener_names_must_be_unique() -> None:
    with pytest.raises(ConfigError, match=r"^listeners: each listener must have a different name"):
        make({"listeners": "PLAINTEXT://:9092,plaintext://:9093"})


def test_listener_ports_must_be_unique() -> None:
    with pytest.raises(ConfigError, match=r"^listeners: .*different port"):
        make({"listeners": "PLAINTEXT://:9092,SSL://:9092"})


def test_port_zero_listeners_may_repeat() -> None:
    c = make({"listeners": "PLAINTEXT://:0,SSL://:0"})
    assert [e.port for e in c.listeners] == [0, 0]


def test_an_ipv4_and_an_ipv6_listener_may_share_a_port() -> None:
    c = make({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092"})
    assert c.listeners[1].host == "::1"
    with pytest.raises(ConfigError):
        make({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.2:9092"})


def test_a_listener_missing_from_the_protocol_map_is_rejected() -> None:
    with pytest.raises(ConfigError, match="no security protocol defined for listener CLIENT"):
        make({"listeners": "CLIENT://:9092"})
    c = make({"listeners": "CLIENT://:9092", "listener.security.protocol.map": "CLIENT:PLAINTEXT"})
    assert c.listeners[0].security_protocol == "PLAINTEXT"


def test_advertised_listeners_default_to_listeners() -> None:
    c = make({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert c.advertised_listeners == c.listeners


def test_advertised_listeners_must_not_use_the_meta_address() -> None:
    with pytest.raises(ConfigError, match=r"^advertised\.listeners: .*0\.0\.0\.0"):
        make({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})


def test_advertised_listeners_must_name_existing_listeners() -> None:
    with pytest.raises(ConfigError, match=r"^advertised\.listeners: listener SSL"):
        make({"advertised.listeners": "PLAINTEXT://h:9092,SSL://h:9093"})


def test_advertised_listeners_may_repeat_ports() -> None:
    c = make(
        {
            "listeners": "PLAINTEXT://:9092,SSL://:9093",
            "advertised.listeners": "PLAINTEXT://h:9000,SSL://h:9000",
        }
    )
    assert {e.port for e in c.advertised_listeners} == {9000}


def test_explicit_inter_broker_listener_must_be_advertised() -> None:
    raw = {
        "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "internal",
    }
    assert make(raw).inter_broker_listener_name == "INTERNAL"
    with pytest.raises(ConfigError, match=r"^inter\.broker\.listener\.name"):
        make({**raw, "advertised.listeners": "PLAINTEXT://h:9092"})


def test_inter_broker_name_and_protocol_are_mutually_exclusive() -> None:
    with pytest.raises(ConfigError, match="only one of"):
        make({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"})


# ---------------------------------------------------------------- listener prefixes


def test_listener_prefixed_value_overrides_broker_value() -> None:
    c = make(
        {
            "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "max.connections": "100",
            "listener.name.internal.max.connections": "10",
        }
    )
    assert c.listener_int("INTERNAL", "max.connections") == 10
    assert c.listener_int("internal", "max.connections") == 10
    assert c.listener_int("PLAINTEXT", "max.connections") == 100


def test_listener_prefixed_values_are_validated() -> None:
    with pytest.raises(ConfigError, match=r"^listener\.name\.plaintext\.num\.network\.threads"):
        make({"listener.name.plaintext.num.network.threads": "0"})


def test_listener_prefixed_known_keys_are_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        load_config(None, ["listener.name.plaintext.max.connection.creation.rate=5"])
    assert caplog.records == []


# ---------------------------------------------------------------- loading


def test_unknown_key_is_warned_about_and_kept(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        c = load_config(None, ["no.such.key=1"])
    assert any("no.such.key" in r.getMessage() for r in caplog.records)
    assert c.raw["no.such.key"] == "1"
    assert c.effective()["no.such.key"] == "1"


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.io.threads=4\nnum.network.threads=2\n")
    c = load_config(str(path), ["num.io.threads=6", "log.dirs=/a=b"])
    assert c.get_int("num.io.threads") == 6
    assert c.get_int("num.network.threads") == 2
    assert c.log_dirs == ["/a=b"]


def test_an_override_without_equals_is_rejected() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["num.io.threads"])


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "missing.properties"))


def test_invalid_value_in_file_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.network.threads=0\n")
    with pytest.raises(ConfigError, match=r"^num\.network\.threads: must be >= 1, got 0$"):
        load_config(str(path))


def test_the_shipped_server_properties_loads_without_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        c = load_config(str(REPO / "config" / "server.properties"))
    assert caplog.records == []
    assert c.listeners == (Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),)
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == ["./data"]
    assert c.get_int("num.network.threads") == 3
    assert c.get_int("num.io.threads") == 8


def test_effective_masks_secrets_and_shows_nulls() -> None:
    c = make(
        {"listener.name.sasl_ssl.plain.sasl.jaas.config": "secret", "ssl.keystore.password": "x"}
    )
    effective = c.effective()
    assert effective["listener.name.sasl_ssl.plain.sasl.jaas.config"] == "[hidden]"
    assert effective["ssl.keystore.password"] == "[hidden]"
    assert effective["cluster.id"] == "null"
    assert effective["num.io.threads"] == "8"


def test_with_updates_returns_a_validated_copy() -> None:
    c = BrokerConfig()
    updated = c.with_updates({"max.connections": "5"})
    assert updated.get_int("max.connections") == 5
    assert c.get_int("max.connections") == 2147483647
    with pytest.raises(ConfigError, match=r"^max\.connections:"):
        c.with_updates({"max.connections": "-2"})


def test_configs_are_equal_when_their_given_values_are() -> None:
    assert make({"num.io.threads": "2"}) == make({"num.io.threads": "2"})
    assert hash(make({"num.io.threads": "2"})) == hash(make({"num.io.threads": "2"}))


# ---------------------------------------------------------------- keys once read outside CONFIG_DEFS

_ONCE_UNDEFINED = {
    "offset.metadata.max.bytes": ("-1", 4096),
    "offsets.retention.check.interval.ms": ("0", 600000),
    "log.message.timestamp.type": ("WallClock", "CreateTime"),
    "log.message.timestamp.before.max.ms": ("soon", 2**63 - 1),
    "log.message.timestamp.after.max.ms": ("-5", 2**63 - 1),
    "log.index.size.max.bytes": ("2", 10485760),
}


@pytest.mark.parametrize("key", sorted(_ONCE_UNDEFINED))
def test_formerly_untyped_keys_have_kafkas_defaults_and_are_not_warned_about(
    key: str, caplog: pytest.LogCaptureFixture
) -> None:
    _bad, default = _ONCE_UNDEFINED[key]
    assert make({}).effective()[key] == str(default)
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        load_config(None, [f"{key}={default}"])
    assert caplog.records == []


@pytest.mark.parametrize("key", sorted(_ONCE_UNDEFINED))
def test_a_bad_value_for_a_formerly_untyped_key_stops_startup_naming_it(key: str) -> None:
    bad, _default = _ONCE_UNDEFINED[key]
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}:"):
        make({key: bad})
    result = subprocess.run(
        [
            *(sys.executable, "-m", "broker", "serve"),
            *("--override", f"{key}={bad}", "--override", "process.count=1"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert key in result.stderr
    assert "Traceback" not in result.stderr


def test_broker_timestamp_and_index_keys_are_the_topic_defaults() -> None:
    from broker.log.log_config import broker_topic_defaults

    defaults = broker_topic_defaults(
        make(
            {
                "log.message.timestamp.type": "LogAppendTime",
                "log.message.timestamp.before.max.ms": "1000",
                "log.message.timestamp.after.max.ms": "2000",
                "log.index.size.max.bytes": "4096",
            }
        )
    )
    assert defaults["message.timestamp.type"] == "LogAppendTime"
    assert defaults["message.timestamp.before.max.ms"] == "1000"
    assert defaults["message.timestamp.after.max.ms"] == "2000"
    assert defaults["segment.index.bytes"] == "4096"


def test_offset_keys_reach_the_group_coordinator() -> None:
    from broker.wiring.group_coordinator import coordinator_config

    coordinator = coordinator_config(
        make({"offset.metadata.max.bytes": "10", "offsets.retention.check.interval.ms": "5"})
    )
    assert coordinator.offset_metadata_max_bytes == 10
    assert coordinator.retention_check_interval_ms == 5


def test_topic_keys_are_defined_once_with_broker_synonyms_that_exist() -> None:
    from broker.config.topic_keys import TOPIC_CONFIGS
    from broker.log.log_config import broker_topic_defaults, validate_topic_configs

    defaults = broker_topic_defaults(make({"log.segment.bytes": "2048"}))
    assert defaults["segment.bytes"] == "2048"
    for name, definition in TOPIC_CONFIGS.items():
        assert all(key in CONFIG_DEFS for key in definition.synonyms), name
        validate_topic_configs({name: defaults[name]}, topic="t")
