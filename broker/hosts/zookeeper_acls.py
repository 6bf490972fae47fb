"""ACLs of hosts coordinated through ZooKeeper, where Kafka 2.x's AclAuthorizer keeps
them: one znode per resource pattern (broker/coordination/acl_znodes.py).

CreateAcls / DeleteAcls on any broker take `lock` (which first re-reads ZooKeeper into
this broker's authorizer, so the change builds on every broker's), then `save` writes
each pattern whose ACLs changed with a conditional write and adds a change
notification; every broker watches the notifications and re-reads the ACLs (and every
`poll_interval_s` besides, should a watch be lost with a session), so an ACL created
through one broker is enforced by every broker within about a second.

The per-broker `__acls.json` is not forgotten: on a start where ZooKeeper holds no ACL,
its ACLs are copied there (logged); otherwise ZooKeeper's are the cluster's and the
file is left as it is, unread (logged).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from pathlib import Path

import trio

from broker.coordination.acl_znodes import (
    ACL_CHANGE_NAME,
    ACL_CHANGES_PATH,
    EXTENDED_ACL_CHANGES_PATH,
    STORED_PATTERN_TYPES,
    STORED_RESOURCE_TYPES,
    decode_acl_entries,
    encode_acl_change,
    encode_acl_entries,
    pattern_of,
    resource_path,
    resource_type_path,
)
from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.store import (
    BadVersionError,
    CoordinationError,
    CoordinationStore,
    NodeExistsError,
    NoNodeError,
    Versioned,
)
from broker.hosts.change_notifications import follow_notifications, notify
from broker.hosts.entity_configs import WRITE_ATTEMPTS
from broker.security.acl import AccessControlEntry, AclBinding, ResourcePattern
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer, StandardAuthorizer

log = logging.getLogger(__name__)

Stored = dict[ResourcePattern, frozenset[AccessControlEntry]]


class ZooKeeperAclStore(AclStore):
    def __init__(
        self,
        log_dir: Path,
        store: CoordinationStore,
        authorizer: Authorizer,
        *,
        poll_interval_s: float = 30.0,
    ) -> None:
        """`authorizer` enforces the ACLs in this broker: every broker's changes go there."""
        super().__init__(log_dir)
        self._store = store
        self._authorizer = authorizer
        self._poll_interval_s = poll_interval_s
        self._local = trio.Lock()
        self._stored: Stored = {}
        self.lock = _FreshChange(self)

    def save_sync(self, bindings: Iterable[AclBinding]) -> None:
        raise TypeError("ACLs of hosts are changed in ZooKeeper: use save()")

    async def save(self, bindings: Iterable[AclBinding]) -> None:
        """Apply what differs from ZooKeeper's ACLs as read under `lock`, pattern by
        pattern, as AclAuthorizer does: the entries added and removed are applied to the
        pattern's znode as it is, so another broker's change to it meanwhile is kept.
        Raises OSError (ZooKeeper unreachable or the write lost to others too often)."""
        wanted: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            wanted.setdefault(binding.pattern, set()).add(binding.entry)
        try:
            for pattern in set(wanted) | set(self._stored):
                before = self._stored.get(pattern, frozenset())
                after = wanted.get(pattern, set())
                if after != before:
                    await self._write(pattern, after - before, before - after)
        except (CoordinationError, MalformedZnode) as exc:
            raise OSError(f"ZooKeeper: {exc}") from exc

    async def _write(
        self,
        pattern: ResourcePattern,
        added: set[AccessControlEntry],
        removed: frozenset[AccessControlEntry],
    ) -> None:
        path = resource_path(pattern)
        for _ in range(WRITE_ATTEMPTS):
            found = await self._store.get(path)
            current = set() if found is None else set(decode_acl_entries(path, found.data))
            entries = (current - removed) | added
            try:
                if found is None:
                    if not entries:
                        return
                    await self._store.ensure_path(path.rsplit("/", 1)[0])
                    await self._store.create(path, encode_acl_entries(entries))
                elif not entries:
                    await self._store.delete(path, version=found.version)
                else:
                    await self._store.set(path, encode_acl_entries(entries), version=found.version)
                break
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue  # another broker changed the pattern meanwhile: apply ours to theirs
        else:
            raise CoordinationError(f"{path}: changed by others {WRITE_ATTEMPTS} times in a row")
        parent, data = encode_acl_change(pattern)
        await notify(self._store, parent, ACL_CHANGE_NAME, data)

    async def _read_all(self) -> Stored:
        stored: Stored = {}
        for pattern_type in STORED_PATTERN_TYPES:
            for resource_type in STORED_RESOURCE_TYPES:
                parent = resource_type_path(pattern_type, resource_type)
                try:
                    names = await self._store.children(parent)
                except NoNodeError:
                    continue
                for name in names:
                    found = await self._store.get(f"{parent}/{name}")
                    pattern = pattern_of(pattern_type, resource_type, name)
                    if found is not None and (entries := self._decode(parent, name, found)):
                        stored[pattern] = entries
        return stored

    @staticmethod
    def _decode(parent: str, name: str, found: Versioned) -> frozenset[AccessControlEntry]:
        try:
            return frozenset(decode_acl_entries(f"{parent}/{name}", found.data))
        except MalformedZnode as exc:
            log.warning("ignoring the ACLs of %s", exc)
            return frozenset()

    async def refresh(self) -> None:
        """Read ZooKeeper's ACLs into the authorizer."""
        stored = await self._read_all()
        self._stored = stored
        if isinstance(self._authorizer, StandardAuthorizer):
            self._authorizer.replace_acls(
                AclBinding(pattern, entry)
                for pattern, entries in stored.items()
                for entry in entries
            )

    async def _adopt_file(self) -> None:
        """Copy the per-broker file's ACLs into a ZooKeeper that has none."""
        from_file = await trio.to_thread.run_sync(self.load)
        if not from_file:
            return
        async with self.lock:
            if self._stored:
                log.info(
                    "ACLs are read from ZooKeeper; the %d in %s are not used",
                    len(from_file),
                    self.path,
                )
                return
            log.info(
                "ZooKeeper holds no ACL: copying the %d of %s to it", len(from_file), self.path
            )
            await self.save(from_file)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A service: ZooKeeper's ACLs before the broker serves, then their changes."""
        for path in (ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH):
            await self._store.ensure_path(path)
        await self._adopt_file()
        await follow_notifications(
            self._store,
            [ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH],
            self._refresh_unless_changing,
            interval_s=self._poll_interval_s,
            what="ACLs",
            task_status=task_status,
        )

    async def _refresh_unless_changing(self) -> None:
        async with self._local:
            await self.refresh()


class _FreshChange(contextlib.AbstractAsyncContextManager[object]):
    """`async with store.lock`: this broker's lock, then ZooKeeper's ACLs re-read, so a
    change builds on every broker's."""

    def __init__(self, store: ZooKeeperAclStore) -> None:
        self._store = store

    async def __aenter__(self) -> ZooKeeperAclStore:
        store = self._store
        await store._local.acquire()
        try:
            await store.refresh()
        except CoordinationError as exc:
            store._local.release()
            raise OSError(f"ZooKeeper: {exc}") from exc
        except BaseException:
            store._local.release()
            raise
        return store

    async def __aexit__(self, *exc_info: object) -> None:
        self._store._local.release()
