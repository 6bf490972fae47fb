"""Client quotas of hosts coordinated through ZooKeeper, where Kafka 2.x keeps them:
`/config/users/<user>`, `/config/clients/<id>`, `/config/users/<user>/clients/<id>` and
`/config/ips/<ip>` (`<default>` for a type's default), beside a user's SCRAM credentials.

AlterClientQuotas on any broker changes each entity's znode (entity_configs.py) and
notifies `/config/changes`; every broker watches it and re-reads the quotas into its
quota managers (and every `poll_interval_s` besides, should a watch be lost with a
session). The per-broker `__client_quotas.json` is copied into a ZooKeeper that holds
no quota (logged); otherwise it is left as it is, unread (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import trio

from broker.broker_context import Service
from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.config_znodes import (
    CLIENTS_CONFIG_PATH,
    CONFIG_CHANGES_PATH,
    CONFIG_PATH,
    IPS_CONFIG_PATH,
    USERS_CONFIG_PATH,
    decode_entity_config,
    encode_quota_value,
    entity_of,
    entity_path,
    quota_values_in,
)
from broker.coordination.store import CoordinationError, CoordinationStore, NoNodeError
from broker.hosts.change_notifications import follow_notifications
from broker.hosts.entity_configs import change_entity_config
from broker.quotas.client_quota_configs import QuotaOp, apply_ops
from broker.quotas.client_quota_entity import ClientQuotaEntity
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore

log = logging.getLogger(__name__)

Quotas = dict[ClientQuotaEntity, dict[str, float]]


class ZooKeeperQuotaStore(QuotaStore):
    def __init__(self, log_dir: Path, store: CoordinationStore) -> None:
        """`log_dir` holds the per-broker file, read to be copied into an empty ZooKeeper."""
        super().__init__(log_dir)
        self.coordination = store

    def update_sync(
        self, changes: Mapping[ClientQuotaEntity, Sequence[QuotaOp]]
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        raise TypeError("quotas of hosts are changed in ZooKeeper: use update()")

    async def update(
        self, changes: Mapping[ClientQuotaEntity, Sequence[QuotaOp]]
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Change each entity's znode; every stored quota afterwards. Raises OSError."""
        try:
            for entity, ops in changes.items():
                await change_entity_config(self.coordination, entity_path(entity), _changer(ops))
            return await self.read_all()
        except (CoordinationError, MalformedZnode) as exc:
            raise OSError(f"ZooKeeper: {exc}") from exc

    async def read_all(self) -> Quotas:
        quotas: Quotas = {}
        for parent in (USERS_CONFIG_PATH, CLIENTS_CONFIG_PATH, IPS_CONFIG_PATH):
            for element in await self._children(parent):
                await self._read(f"{parent}/{element}", quotas)
                if parent == USERS_CONFIG_PATH:
                    clients = f"{parent}/{element}/clients"
                    for client in await self._children(clients):
                        await self._read(f"{clients}/{client}", quotas)
        return quotas

    async def _children(self, path: str) -> list[str]:
        try:
            return await self.coordination.children(path)
        except NoNodeError:
            return []

    async def _read(self, path: str, quotas: Quotas) -> None:
        found = await self.coordination.get(path)
        if found is None:
            return
        try:
            values = quota_values_in(path, decode_entity_config(path, found.data))
            if values:
                quotas[entity_of(path.removeprefix(CONFIG_PATH + "/"))] = values
        except MalformedZnode as exc:
            log.warning("ignoring the client quotas of %s", exc)

    def following(self, quotas: QuotaManagers, poll_interval_s: float = 30.0) -> Service:
        """The service that keeps `quotas` what ZooKeeper holds."""
        return _QuotaFollower(self, quotas, poll_interval_s)


def _changer(ops: Sequence[QuotaOp]) -> Callable[[dict[str, str]], None]:
    def change(config: dict[str, str]) -> None:
        current = quota_values_in("", config)
        for key in current:
            del config[key]
        config.update({k: encode_quota_value(k, v) for k, v in apply_ops(current, ops).items()})

    return change


class _QuotaFollower:
    def __init__(
        self, store: ZooKeeperQuotaStore, quotas: QuotaManagers, interval_s: float
    ) -> None:
        self._store = store
        self._quotas = quotas
        self._interval_s = interval_s

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._adopt_file()
        await follow_notifications(
            self._store.coordination,
            [CONFIG_CHANGES_PATH],
            self._reread,
            interval_s=self._interval_s,
            what="client quotas",
            task_status=task_status,
        )

    async def _reread(self) -> None:
        async with self._store.lock:
            stored = await self._store.read_all()
            self._quotas.set_all_quotas(stored)

    async def _adopt_file(self) -> None:
        store = self._store
        await store.coordination.ensure_path(CONFIG_CHANGES_PATH)
        from_file = await trio.to_thread.run_sync(store.load)
        if not from_file:
            return
        async with store.lock:
            if await store.read_all():
                log.info(
                    "client quotas are read from ZooKeeper; the %d in %s are not used",
                    len(from_file),
                    store.path,
                )
                return
            log.info(
                "ZooKeeper holds no client quota: copying the %d of %s to it",
                len(from_file),
                store.path,
            )
            await store.update(
                {
                    entity: [QuotaOp(key, value) for key, value in values.items()]
                    for entity, values in from_file.items()
                }
            )
