"""Dynamic broker configs are stored before they take effect: a fresh BrokerConfigs over
the same log dir (a restart) describes them with their sources, validate_only and refused
changes write nothing, a change that cannot be stored is an error, and layers stored by
another process are applied as far as they can be, never over a change made meanwhile."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from broker.config import DYNAMIC_BROKER_CONFIGS
from broker.config.types import ConfigSource
from broker.dynamic_broker_config_store import (
    BROKER_CONFIGS_FILE,
    DynamicBrokerConfigStore,
    LayerChange,
    StoredBrokerConfigs,
    encode_broker_configs,
    is_sensitive,
)
from broker.errors import KafkaError
from broker.handlers import broker_configs as broker_configs_module
from broker.handlers.broker_configs import BrokerConfigs
from broker.protocol.error_codes import ErrorCode
from tests.handlers.test_handler_logic import FakeServer


def described(configs: BrokerConfigs, resource: str, name: str) -> tuple[str | None, int]:
    (entry,) = configs.describe(
        resource, [name], include_synonyms=False, include_documentation=False
    )
    return entry.value, entry.config_source


async def test_an_alter_is_described_with_its_source_after_a_restart(tmp_path: Path) -> None:
    configs = BrokerConfigs(FakeServer(), DynamicBrokerConfigStore(tmp_path))
    await configs.alter("", {"max.connections": "100", "num.io.threads": "6"})
    await configs.alter("1", {"max.connections.per.ip": "7"})
    restarted_server = FakeServer()
    restarted = BrokerConfigs(restarted_server, DynamicBrokerConfigStore(tmp_path))
    assert described(restarted, "1", "max.connections") == (
        "100",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert described(restarted, "1", "max.connections.per.ip") == (
        "7",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert described(restarted, "", "num.io.threads") == (
        "6",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    running = restarted.startup_config()
    assert running.get_int("num.io.threads") == 6
    assert running.get_int("max.connections") == 100
    assert running.get_int("max.connections.per.ip") == 7
    assert restarted_server.config.get_int("num.io.threads") == 4, "the static layer stays"


async def test_validate_only_and_refused_changes_write_nothing(tmp_path: Path) -> None:
    configs = BrokerConfigs(FakeServer(), DynamicBrokerConfigStore(tmp_path))
    await configs.alter("", {"max.connections": "10"}, validate_only=True)
    with pytest.raises(KafkaError):
        await configs.alter("", {"max.connections.per.ip": "0"})
    with pytest.raises(KafkaError):
        await configs.alter("1", {"num.io.threads": "100"})  # more than double
    assert not (tmp_path / BROKER_CONFIGS_FILE).exists()


async def test_a_change_that_cannot_be_stored_is_an_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    server = FakeServer()
    configs = BrokerConfigs(server, DynamicBrokerConfigStore(tmp_path))
    (tmp_path / BROKER_CONFIGS_FILE).write_text('{"version": 99}')  # not ours
    with pytest.raises(KafkaError) as raised:
        await configs.alter("", {"max.connections": "10", "num.io.threads": "5"})
    assert raised.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "cannot store" in str(raised.value)
    assert server.quota_configs == [] and server.io_threads == 4
    assert configs.value("max.connections") == str(2**31 - 1)


async def test_a_sensitive_dynamic_key_would_be_refused_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        broker_configs_module,
        "DYNAMIC_BROKER_CONFIGS",
        DYNAMIC_BROKER_CONFIGS | {"ssl.key.password"},
    )
    configs = BrokerConfigs(FakeServer(), DynamicBrokerConfigStore(tmp_path))
    with pytest.raises(KafkaError) as raised:
        await configs.alter("", {"ssl.key.password": "hunter2"})
    assert raised.value.error_code == ErrorCode.INVALID_REQUEST
    assert "plain text" in str(raised.value)
    assert not (tmp_path / BROKER_CONFIGS_FILE).exists()


def test_no_dynamic_broker_config_is_a_password() -> None:
    assert not [n for n in DYNAMIC_BROKER_CONFIGS if is_sensitive(n)]


async def test_layers_stored_by_another_process_apply_as_far_as_they_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer()
    configs = BrokerConfigs(server, DynamicBrokerConfigStore(tmp_path))
    stored = StoredBrokerConfigs(
        {"max.connections": "50", "num.io.threads": "100"},  # 100 > double 4: not applied
        {1: {"num.network.threads": "4"}, 2: {"max.connections": "1"}},
    )

    async def stored_by_another_process(layers: StoredBrokerConfigs) -> None:
        (tmp_path / BROKER_CONFIGS_FILE).write_bytes(encode_broker_configs(layers))
        await configs.reload()

    with caplog.at_level(logging.ERROR, logger=broker_configs_module.__name__):
        await stored_by_another_process(stored)
    assert "num.io.threads" in caplog.text
    assert server.io_threads == 4 and server.network_threads == 4
    assert [c.get_int("max.connections") for c in server.quota_configs] == [50]
    assert described(configs, "1", "max.connections") == (
        "50",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert described(configs, "1", "num.network.threads") == (
        "4",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    await stored_by_another_process(stored)  # the same layers again: nothing more to do
    assert len(server.quota_configs) == 1
    await stored_by_another_process(StoredBrokerConfigs({"num.io.threads": "6"}))
    assert server.io_threads == 6, "measured from the 4 running, not the 100 stored"
    assert server.network_threads == 3 and server.quota_configs[-1].get_int("max.connections") == (
        2**31 - 1
    )


async def test_an_alter_keeps_what_another_process_stored_meanwhile(tmp_path: Path) -> None:
    server = FakeServer()
    configs = BrokerConfigs(server, DynamicBrokerConfigStore(tmp_path))
    DynamicBrokerConfigStore(tmp_path).update_sync(LayerChange(None, {"max.connections": "80"}))
    await configs.alter("", {"max.connections.per.ip": "9"})
    assert configs.value("max.connections") == "80"
    assert (
        server.quota_configs[-1].get_int("max.connections"),
        server.quota_configs[-1].get_int("max.connections.per.ip"),
    ) == (80, 9)


class PausedReads(DynamicBrokerConfigStore):
    """The file store, whose reads return what the file held when they started but
    finish only once `finish` is set: a reload slower than an alter beside it."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir)
        self.reading = trio.Event()
        self.finish = trio.Event()

    async def read(self) -> StoredBrokerConfigs:
        held = self.load()
        self.reading.set()
        await self.finish.wait()
        return held


async def test_a_reload_that_began_before_an_alter_never_undoes_it(tmp_path: Path) -> None:
    store = PausedReads(tmp_path)
    configs = BrokerConfigs(FakeServer(), store)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(configs.reload)  # another process changed the file
        await store.reading.wait()
        nursery.start_soon(configs.alter, "1", {"max.connections": "902"})
        await wait_all_tasks_blocked()
        store.finish.set()
    assert described(configs, "1", "max.connections") == ("902", ConfigSource.DYNAMIC_BROKER_CONFIG)
    await configs.reload()  # the file as the alter left it
    assert described(configs, "1", "max.connections") == ("902", ConfigSource.DYNAMIC_BROKER_CONFIG)
