"""The stored dynamic broker configs: the document round-trips, a file that is not ours is
refused, changes build on what is stored, and no password is written in plain text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from broker.dynamic_broker_config_store import (
    BROKER_CONFIGS_FILE,
    DynamicBrokerConfigStore,
    LayerChange,
    StoredBrokerConfigs,
    apply_change,
    decode_broker_configs,
    encode_broker_configs,
    is_sensitive,
)

names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20).filter(
    lambda n: not is_sensitive(n)
)
values = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
layers = st.dictionaries(names, values, max_size=4)
stored_configs = st.builds(
    StoredBrokerConfigs,
    layers,
    st.dictionaries(st.integers(-(2**31), 2**31 - 1), layers, max_size=4),
)


@given(stored_configs)
def test_stored_configs_survive_encoding(stored: StoredBrokerConfigs) -> None:
    assert decode_broker_configs(encode_broker_configs(stored)) == stored


@given(
    stored_configs, st.one_of(st.none(), st.integers(0, 5)), layers, st.lists(names), st.booleans()
)
def test_a_change_touches_only_its_own_layer(
    stored: StoredBrokerConfigs,
    node_id: int | None,
    set_: dict[str, str],
    delete: list[str],
    replace_all: bool,
) -> None:
    after = apply_change(stored, LayerChange(node_id, set_, tuple(delete), replace_all))
    before_layer = stored.cluster_default if node_id is None else stored.for_node(node_id)
    after_layer = after.cluster_default if node_id is None else after.for_node(node_id)
    expected = {} if replace_all else dict(before_layer)
    for name in delete:
        expected.pop(name, None)
    expected.update(set_)
    assert dict(after_layer) == expected
    if node_id is not None:
        assert after.cluster_default == stored.cluster_default
    others = {n for n in {*stored.per_broker, *after.per_broker} if n != node_id}
    assert {n: after.for_node(n) for n in others} == {n: stored.for_node(n) for n in others}


@pytest.mark.parametrize(
    "document",
    [
        b"",
        b"{not json",
        b"\xff\xfe",
        b"[]",
        json.dumps({"version": 2, "default": {}, "brokers": {}}).encode(),
        json.dumps({"default": {}, "brokers": {}}).encode(),
        json.dumps({"version": 1, "default": {}}).encode(),
        json.dumps({"version": 1, "default": [], "brokers": {}}).encode(),
        json.dumps({"version": 1, "default": {"a": 1}, "brokers": {}}).encode(),
        json.dumps({"version": 1, "default": {}, "brokers": {"one": {}}}).encode(),
        json.dumps({"version": 1, "default": {}, "brokers": {"1": "x"}}).encode(),
    ],
)
def test_a_file_that_is_not_ours_raises_value_error(document: bytes) -> None:
    with pytest.raises(ValueError):
        decode_broker_configs(document)


def test_a_password_is_never_written_in_plain_text(tmp_path: Path) -> None:
    store = DynamicBrokerConfigStore(tmp_path)
    store.update_sync(LayerChange(None, {"max.connections": "10"}))
    for change in (
        LayerChange(None, {"ssl.key.password": "hunter2"}),
        LayerChange(3, {"listener.name.x.sasl.jaas.config": "hunter2"}),
    ):
        with pytest.raises(ValueError, match="plain text"):
            store.update_sync(change)
    text = (tmp_path / BROKER_CONFIGS_FILE).read_text()
    assert "hunter2" not in text
    assert store.load() == StoredBrokerConfigs({"max.connections": "10"})


async def test_changes_through_two_stores_build_on_the_file_and_survive_a_reload(
    tmp_path: Path,
) -> None:
    one, other = DynamicBrokerConfigStore(tmp_path), DynamicBrokerConfigStore(tmp_path)
    assert one.load() == StoredBrokerConfigs()
    await one.update(LayerChange(None, {"max.connections": "100"}))
    await other.update(LayerChange(2, {"num.io.threads": "4"}))
    after = await one.update(LayerChange(None, {"max.connections.per.ip": "7"}))
    expected = StoredBrokerConfigs(
        {"max.connections": "100", "max.connections.per.ip": "7"}, {2: {"num.io.threads": "4"}}
    )
    assert after == expected
    assert DynamicBrokerConfigStore(tmp_path).load() == expected
    emptied = await other.update(LayerChange(2, {}, ("num.io.threads",)))
    assert 2 not in emptied.per_broker


async def test_a_stored_file_that_is_not_ours_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / BROKER_CONFIGS_FILE
    path.write_bytes(b'{"version": 99}')
    store = DynamicBrokerConfigStore(tmp_path)
    with pytest.raises(ValueError, match=str(path)):
        store.load()
    with pytest.raises(ValueError):
        await store.update(LayerChange(None, {"max.connections": "1"}))
    assert path.read_bytes() == b'{"version": 99}'


async def test_concurrent_changes_through_many_stores_all_last(tmp_path: Path) -> None:
    async def set_limit(node_id: int) -> None:
        await DynamicBrokerConfigStore(tmp_path).update(
            LayerChange(node_id, {"max.connections": str(node_id)})
        )

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for node_id in range(8):
                nursery.start_soon(set_limit, node_id)
    stored = DynamicBrokerConfigStore(tmp_path).load()
    assert {n: dict(layer) for n, layer in stored.per_broker.items()} == {
        n: {"max.connections": str(n)} for n in range(8)
    }
