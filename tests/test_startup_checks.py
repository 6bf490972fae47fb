"""Configuration errors an operator can act on: the key, the file, what was expected."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError, load_config, unknown_key_warning
from broker.errors import KafkaError
from broker.log.log_config import validate_topic_configs
from broker.startup_checks import check_startup_config


def test_a_typo_in_a_key_is_warned_with_the_nearest_known_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        load_config(None, ["num.partitons=3"])
    assert "num.partitons: unknown config key" in caplog.text
    assert "did you mean num.partitions?" in caplog.text


def test_a_topic_key_given_to_the_broker_points_at_its_broker_default() -> None:
    assert "did you mean log.retention.ms?" in unknown_key_warning("retention.ms")


def test_a_typo_in_a_per_listener_key_keeps_its_listener_prefix() -> None:
    warning = unknown_key_warning("listener.name.ssl.ssl.keystore.locaton")
    assert "did you mean listener.name.ssl.ssl.keystore.location?" in warning


def test_a_key_like_no_other_gets_no_suggestion() -> None:
    assert "did you mean" not in unknown_key_warning("zzz.qqq")


def test_a_non_integer_topic_config_says_an_integer_is_expected() -> None:
    with pytest.raises(KafkaError) as caught:
        validate_topic_configs({"retention.ms": "abc"}, topic="t")
    assert "retention.ms" in caught.value.message
    assert "expected an integer" in caught.value.message
    assert "invalid literal" not in caught.value.message


def test_a_non_integer_broker_config_says_an_integer_is_expected() -> None:
    with pytest.raises(ConfigError, match=r"^log.retention.ms: expected an integer, got 'abc'"):
        BrokerConfig({"log.retention.ms": "abc"})


def test_a_log_dir_that_is_a_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("")
    with pytest.raises(ConfigError, match=rf"^log.dirs: {a_file} is a file, not a directory$"):
        check_startup_config(BrokerConfig({"log.dirs": str(a_file)}))


def test_a_log_dir_under_a_file_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    config = BrokerConfig({"log.dir": str(tmp_path / "file" / "data")})
    with pytest.raises(ConfigError, match=r"^log.dir: cannot create the log directory .*"):
        check_startup_config(config)


def test_a_missing_key_store_names_the_key_and_the_file(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "ssl.keystore.location": "/nonexistent.pem",
        }
    )
    with pytest.raises(ConfigError) as caught:
        check_startup_config(config)
    assert str(caught.value) == (
        "ssl.keystore.location: cannot load the key store /nonexistent.pem: "
        "No such file or directory"
    )


def test_a_key_store_that_is_not_pem_names_the_file(tmp_path: Path) -> None:
    garbage = tmp_path / "keystore.pem"
    garbage.write_text("not a certificate\n")
    config = BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "listener.name.ssl.ssl.keystore.location": str(garbage),
        }
    )
    with pytest.raises(
        ConfigError, match=rf"^listener.name.ssl.ssl.keystore.location: .*{garbage}"
    ):
        check_startup_config(config)


def test_a_plaintext_broker_with_a_usable_log_dir_passes(tmp_path: Path) -> None:
    check_startup_config(BrokerConfig({"log.dirs": str(tmp_path / "new" / "data")}))
    assert (tmp_path / "new" / "data").is_dir()


def test_a_host_among_hosts_lowered_to_one_process_refuses_its_processes_logs_below(
    tmp_path: Path,
) -> None:
    """Left at the top, `node-1` and `node-2` would be taken for partition dirs of a
    topic `node` and deleted as stray."""
    for node in (1, 2):
        (tmp_path / f"node-{node}").mkdir()
        (tmp_path / f"node-{node}" / "meta.properties").write_text(f"node.id={node}\n")
    (tmp_path / "node-3").mkdir()  # a partition dir of a topic `node`: no meta.properties
    settings = {"log.dirs": str(tmp_path), "zookeeper.connect": "127.0.0.1:2181"}
    with pytest.raises(
        ConfigError,
        match=r"holds the logs of a host of several processes"
        r" \(node-1, node-2\); with zookeeper.connect and process.count=1",
    ):
        check_startup_config(BrokerConfig({**settings, "process.count": "1"}))
    check_startup_config(BrokerConfig({**settings, "process.count": "2"}))  # the supervisor's
    check_startup_config(BrokerConfig({"log.dirs": str(tmp_path), "process.count": "1"}))
