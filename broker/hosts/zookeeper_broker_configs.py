"""Dynamic broker configs of hosts coordinated through ZooKeeper, where Kafka 2.x keeps
them: `/config/brokers/<default>` (the cluster-wide default) and `/config/brokers/<id>`
(one broker's layer), in the entity-config format of the users' and clients' znodes.

IncrementalAlterConfigs or AlterConfigs of the default, sent to any broker, rewrites the
default's znode (entity_configs.py: a conditional write) and notifies `/config/changes`;
every broker watches it and re-reads the default and its own layer, applying them as a
change made through itself (thread pools resized, connection limits, replication
throttles). A broker's own layer is changed through that broker, as Kafka asks.

The layers are read once ZooKeeper is connected, so a thread count stored there takes
effect right after start-up (under Kafka's half..double rule), not from the first
connection. The per-broker `__broker_configs.json` is copied into a ZooKeeper that
holds neither the default nor this broker's layer (logged); otherwise it is left unread.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.config_znodes import (
    BROKERS_CONFIG_PATH,
    CONFIG_CHANGES_PATH,
    DEFAULT_ENTITY,
    decode_entity_config,
)
from broker.coordination.store import CoordinationError, CoordinationStore
from broker.dynamic_broker_config_store import (
    DynamicBrokerConfigStore,
    LayerChange,
    StoredBrokerConfigs,
    is_sensitive,
)
from broker.handlers.broker_configs import BrokerConfigs
from broker.hosts.change_notifications import follow_notifications
from broker.hosts.entity_configs import change_entity_config

log = logging.getLogger(__name__)


def layer_entity(node_id: int | None) -> str:
    """The layer's path relative to /config, as a change notification names it."""
    return f"brokers/{DEFAULT_ENTITY if node_id is None else node_id}"


class ZooKeeperBrokerConfigStore(DynamicBrokerConfigStore):
    def __init__(self, log_dir: Path, store: CoordinationStore, node_id: int) -> None:
        """`log_dir` holds the per-broker file, read to be copied into an empty ZooKeeper."""
        super().__init__(log_dir)
        self.coordination = store
        self.node_id = node_id
        self._read = StoredBrokerConfigs()

    def load(self) -> StoredBrokerConfigs:
        """The layers last read from ZooKeeper (none before it is connected)."""
        return self._read

    def update_sync(self, change: LayerChange) -> StoredBrokerConfigs:
        raise TypeError("broker configs of hosts are changed in ZooKeeper: use update()")

    async def update(self, change: LayerChange) -> StoredBrokerConfigs:
        """Change the layer's znode, notify every broker, and read the layers back.
        Raises OSError (ZooKeeper) or ValueError (a password: nothing is written)."""
        secret = sorted(name for name in change.set_ if is_sensitive(name))
        if secret:
            raise ValueError(f"{', '.join(secret)}: a password is not stored in plain text")

        def apply(config: dict[str, str]) -> None:
            if change.replace_all:
                config.clear()
            for name in change.delete:
                config.pop(name, None)
            config.update(change.set_)

        try:
            await change_entity_config(self.coordination, layer_entity(change.node_id), apply)
            return await self.read()
        except (CoordinationError, MalformedZnode) as exc:
            raise OSError(f"ZooKeeper: {exc}") from exc

    async def read(self) -> StoredBrokerConfigs:
        """The default and this broker's layer (the others' layers are theirs)."""
        default = await self._layer(None)
        own = await self._layer(self.node_id)
        self._read = StoredBrokerConfigs(default, {self.node_id: own})
        return self._read

    async def _layer(self, node_id: int | None) -> dict[str, str]:
        path = f"{BROKERS_CONFIG_PATH}/{layer_entity(node_id).split('/', 1)[1]}"
        found = await self.coordination.get(path)
        return {} if found is None else decode_entity_config(path, found.data)

    def following(self, broker_configs: BrokerConfigs, poll_interval_s: float = 30.0) -> _Follower:
        """The service that keeps `broker_configs` what ZooKeeper holds."""
        return _Follower(self, broker_configs, poll_interval_s)


class _Follower:
    def __init__(
        self, store: ZooKeeperBrokerConfigStore, broker_configs: BrokerConfigs, interval_s: float
    ) -> None:
        self._store = store
        self._broker_configs = broker_configs
        self._interval_s = interval_s

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._store.coordination.ensure_path(CONFIG_CHANGES_PATH)
        await self._adopt_file()
        await follow_notifications(
            self._store.coordination,
            [CONFIG_CHANGES_PATH],
            self._reread,
            interval_s=self._interval_s,
            what="dynamic broker configs",
            task_status=task_status,
        )

    async def _reread(self) -> None:
        try:
            await self._broker_configs.reload()
        except MalformedZnode as exc:
            log.warning("ignoring the dynamic broker configs of %s", exc)

    async def _adopt_file(self) -> None:
        store = self._store
        node_id = store.node_id
        from_file = await trio.to_thread.run_sync(DynamicBrokerConfigStore.load, store)
        own_file = from_file.for_node(node_id)
        if not from_file.cluster_default and not own_file:
            return
        held = await store.read()
        if held.cluster_default or held.for_node(node_id):
            log.info(
                "dynamic broker configs are read from ZooKeeper %s; %s is not used",
                BROKERS_CONFIG_PATH,
                store.path,
            )
            return
        log.info("ZooKeeper holds no dynamic broker config: copying %s to it", store.path)
        for layer_node, layer in ((None, from_file.cluster_default), (node_id, own_file)):
            if layer:
                await store.update(LayerChange(layer_node, layer))
