"""SCRAM credentials of hosts coordinated through ZooKeeper, where Kafka 2.x keeps them.

AlterUserScramCredentials on any broker rewrites `/config/users/<user>` (a conditional
write, so quotas another broker wrote into the same znode are kept) and adds a
`/config/changes/config_change_<seq>` notification; every broker watches
`/config/changes` and re-reads the users when a notification comes (and every
`poll_interval_s` besides, should a watch be lost with a session), so a user created
through one broker logs in on every broker within about a second.

Authentications read the credentials from memory, as with the per-broker file. That
file (`scram-credentials.json`) is not forgotten: on a start where ZooKeeper holds no
credential at all, its credentials are copied there (logged), as an operator
upgrading to hosts would with `kafka-configs.sh --zookeeper`; otherwise ZooKeeper's
are the cluster's and the file is left as it is, unread (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import trio

from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.config_znodes import (
    CONFIG_CHANGES_PATH,
    USERS_CONFIG_PATH,
    decode_entity_config,
    desanitize,
    encode_scram_credential,
    sanitize,
    scram_credentials_in,
)
from broker.coordination.store import CoordinationError, CoordinationStore
from broker.hosts.change_notifications import follow_notifications
from broker.hosts.entity_configs import change_entity_config
from broker.security.scram_credentials import ScramCredential, ScramCredentialStore

log = logging.getLogger(__name__)

Credentials = dict[tuple[str, str], ScramCredential]


class ZooKeeperScramCredentials(ScramCredentialStore):
    def __init__(
        self, path: Path, store: CoordinationStore, *, poll_interval_s: float = 30.0
    ) -> None:
        """`path` is the per-broker file, read once to be copied into an empty ZooKeeper."""
        super().__init__(path)
        self._store = store
        self._poll_interval_s = poll_interval_s
        self._file_credentials = dict(self._credentials)

    def apply(
        self,
        upserts: Mapping[tuple[str, str], ScramCredential],
        deletions: Iterable[tuple[str, str]],
    ) -> None:
        raise TypeError("credentials of hosts are changed in ZooKeeper: use alter()")

    def reload(self) -> None:
        raise TypeError("credentials of hosts follow ZooKeeper by themselves")

    async def alter(
        self,
        upserts: Mapping[tuple[str, str], ScramCredential],
        deletions: Iterable[tuple[str, str]],
    ) -> None:
        """Write each user's znode, notify every broker, and read them back. Raises OSError
        (ZooKeeper unreachable or the write lost to others too often)."""
        by_user: dict[str, dict[str, ScramCredential | None]] = {}
        for user, mechanism in deletions:
            by_user.setdefault(user, {})[mechanism] = None
        for (user, mechanism), credential in upserts.items():
            by_user.setdefault(user, {})[mechanism] = credential
        try:
            for user, changes in by_user.items():
                entity = f"users/{sanitize(user)}"
                await change_entity_config(self._store, entity, self._changer(changes))
            await self._read_all()
        except (CoordinationError, MalformedZnode) as exc:
            raise OSError(f"ZooKeeper: {exc}") from exc

    @staticmethod
    def _changer(
        changes: Mapping[str, ScramCredential | None],
    ) -> Callable[[dict[str, str]], None]:
        def change(config: dict[str, str]) -> None:
            for mechanism, credential in changes.items():
                if credential is None:
                    config.pop(mechanism, None)
                else:
                    config[mechanism] = encode_scram_credential(credential)

        return change

    async def _read_all(self) -> Credentials:
        credentials: Credentials = {}
        for element in await self._store.children(USERS_CONFIG_PATH):
            path = f"{USERS_CONFIG_PATH}/{element}"
            found = await self._store.get(path)
            if found is None:
                continue
            try:
                user_credentials = scram_credentials_in(
                    path, decode_entity_config(path, found.data)
                )
            except MalformedZnode as exc:
                log.warning("ignoring the SCRAM credentials of %s", exc)
                continue
            user = desanitize(element)
            credentials.update({(user, m): c for m, c in user_credentials.items()})
        self._credentials = credentials
        return credentials

    async def _adopt_file(self) -> None:
        """Copy the per-broker file's credentials into a ZooKeeper that has none."""
        if not self._file_credentials:
            return
        if await self._read_all():
            log.info(
                "SCRAM credentials are read from ZooKeeper %s; the %d in %s are not used",
                USERS_CONFIG_PATH,
                len(self._file_credentials),
                self.path,
            )
            return
        log.info(
            "ZooKeeper holds no SCRAM credential: copying the %d of %s to %s",
            len(self._file_credentials),
            self.path,
            USERS_CONFIG_PATH,
        )
        await self.alter(self._file_credentials, ())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A service: read the credentials before the broker serves, then follow changes."""
        await self._store.ensure_path(USERS_CONFIG_PATH)
        await self._store.ensure_path(CONFIG_CHANGES_PATH)
        await self._adopt_file()
        await follow_notifications(
            self._store,
            [CONFIG_CHANGES_PATH],
            self._read_all,
            interval_s=self._poll_interval_s,
            what="SCRAM credentials",
            task_status=task_status,
        )
