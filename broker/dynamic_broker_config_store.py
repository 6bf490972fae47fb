"""Dynamic broker configs on disk: `__broker_configs.json` in the first log dir.

Kafka keeps them in its metadata log, so they outlive a restart and reach every broker.
Here they are one JSON document replaced atomically and durably on every change, as the
client quotas are (broker/quotas/quota_store.py): a crash leaves the old or the new
document, never a mix. The processes of a cluster share the file: a change is read,
applied and written under an exclusive lock on `__broker_configs.json.lock`, so changes
made at the same moment through two processes all last, and each process follows the
file (broker/cluster/shared_file.py).

Secrets are never written in plain text: a sensitive key (a password) is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

import attrs
import trio

from broker.config import CONFIG_DEFS, ConfigType
from broker.log._files import atomic_write, exclusive_flock

BROKER_CONFIGS_FILE = "__broker_configs.json"
_VERSION = 1
_SENSITIVE = re.compile(r"(password|secret|jaas\.config|keystore\.key$)", re.IGNORECASE)


def is_sensitive(name: str) -> bool:
    """A password or key material: described masked, never stored in plain text."""
    definition = CONFIG_DEFS.get(name)
    return (definition is not None and definition.type == ConfigType.PASSWORD) or bool(
        _SENSITIVE.search(name)
    )


def _frozen_layer(layer: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(layer.items())))


def _frozen_nodes(nodes: Mapping[int, Mapping[str, str]]) -> Mapping[int, Mapping[str, str]]:
    return MappingProxyType(
        {n: _frozen_layer(layer) for n, layer in sorted(nodes.items()) if layer}
    )


@attrs.frozen
class StoredBrokerConfigs:
    """The stored layers: the cluster-wide default (resource name "") and one layer per
    node id (resource name = that id). Empty layers are dropped."""

    cluster_default: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_layer)
    per_broker: Mapping[int, Mapping[str, str]] = attrs.field(factory=dict, converter=_frozen_nodes)

    def for_node(self, node_id: int) -> Mapping[str, str]:
        return self.per_broker.get(node_id, MappingProxyType({}))


@attrs.frozen
class LayerChange:
    """One alter of one layer: `node_id` None is the cluster-wide default; `replace_all`
    (AlterConfigs) drops the keys not set."""

    node_id: int | None
    set_: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_layer)
    delete: tuple[str, ...] = ()
    replace_all: bool = False


def apply_change(stored: StoredBrokerConfigs, change: LayerChange) -> StoredBrokerConfigs:
    """The layers after `change`; the others stay as they are."""
    layer = stored.cluster_default if change.node_id is None else stored.for_node(change.node_id)
    new_layer = {} if change.replace_all else dict(layer)
    for name in change.delete:
        new_layer.pop(name, None)
    new_layer.update(change.set_)
    if change.node_id is None:
        return StoredBrokerConfigs(new_layer, stored.per_broker)
    nodes = dict(stored.per_broker)
    nodes[change.node_id] = new_layer
    return StoredBrokerConfigs(stored.cluster_default, nodes)


def _check_not_sensitive(names: Iterable[str]) -> None:
    secret = sorted(name for name in names if is_sensitive(name))
    if secret:
        raise ValueError(
            f"{', '.join(secret)}: a password is not stored in plain text, "
            "so it cannot be set as a dynamic broker config"
        )


def encode_broker_configs(stored: StoredBrokerConfigs) -> bytes:
    """Raises ValueError for a sensitive key (nothing is written in plain text)."""
    _check_not_sensitive(stored.cluster_default)
    for layer in stored.per_broker.values():
        _check_not_sensitive(layer)
    document = {
        "version": _VERSION,
        "default": dict(stored.cluster_default),
        "brokers": {str(node): dict(layer) for node, layer in stored.per_broker.items()},
    }
    return json.dumps(document, indent=1, sort_keys=True).encode()


def _layer(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"a layer must map names to strings, got {value!r}")
    return value


def decode_broker_configs(data: bytes) -> StoredBrokerConfigs:
    """Raises ValueError for a document that is not ours."""
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed broker config file: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != _VERSION:
        raise ValueError("unknown broker config file format")
    brokers = document.get("brokers")
    if not isinstance(brokers, dict):
        raise ValueError("malformed broker config file: no brokers")
    try:
        nodes = {int(node): _layer(layer) for node, layer in brokers.items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed broker config file: {exc}") from None
    return StoredBrokerConfigs(_layer(document.get("default")), nodes)


class DynamicBrokerConfigStore:
    """The file; callers order their own changes (BrokerConfigs holds a lock), the file
    lock orders them between processes."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / BROKER_CONFIGS_FILE

    def load(self) -> StoredBrokerConfigs:
        """The stored layers; a missing file is none. Raises OSError or ValueError."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return StoredBrokerConfigs()
        try:
            return decode_broker_configs(data)
        except ValueError as exc:
            raise ValueError(f"{self.path}: {exc}") from None

    def update_sync(self, change: LayerChange) -> StoredBrokerConfigs:
        """Apply `change` to the layers as stored now, durably, under the file lock;
        returns every stored layer afterwards (other processes' changes included).
        Raises OSError or ValueError (a file that is not ours, a sensitive key: nothing
        is written)."""
        with exclusive_flock(self.path.with_name(self.path.name + ".lock")):
            stored = apply_change(self.load(), change)
            data = encode_broker_configs(stored)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, data)
            return stored

    async def update(self, change: LayerChange) -> StoredBrokerConfigs:
        """`update_sync` in a worker thread (the lock and fsync block)."""
        return await trio.to_thread.run_sync(self.update_sync, change)

    async def read(self) -> StoredBrokerConfigs:
        """`load` in a worker thread: the layers as another process may have left them."""
        return await trio.to_thread.run_sync(self.load)


__all__ = [
    "BROKER_CONFIGS_FILE",
    "DynamicBrokerConfigStore",
    "LayerChange",
    "StoredBrokerConfigs",
    "apply_change",
    "decode_broker_configs",
    "encode_broker_configs",
    "is_sensitive",
]
