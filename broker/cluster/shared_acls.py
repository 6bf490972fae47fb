"""ACLs shared by the processes of a cluster: one `__acls.json`, changed under a file lock.

Each process keeps the ACLs in memory (its authorizer) as a single broker does.
A change (CreateAcls / DeleteAcls) takes an exclusive `flock` on
`__acls.json.lock`, re-reads the file when another process changed it, computes
the new set from that and writes it, so no process overwrites another's change.
Every process also watches the file (its size, mtime and inode, once per
`cluster.metadata.poll.interval.ms`) and reloads it when it changes; a process
enforces another's change within that interval, as Kafka's brokers do once
the metadata log reaches them.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

import trio

from broker.cluster.shared_file import Signature, file_signature
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer, StandardAuthorizer

log = logging.getLogger(__name__)


class SharedAclStore(AclStore):
    def __init__(self, log_dir: Path, poll_interval_s: float, authorizer: Authorizer) -> None:
        """`authorizer` enforces the ACLs in this process: another's changes go there."""
        super().__init__(log_dir)
        self.poll_interval_s = poll_interval_s
        self.authorizer = authorizer
        self._local = trio.Lock()
        self._seen: Signature = file_signature(self.path)
        self.lock = _ExclusiveChange(self)

    def _lock_file(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    async def reload_if_changed(self) -> None:
        signature = file_signature(self.path)
        if signature == self._seen:
            return
        authorizer = self.authorizer
        if isinstance(authorizer, StandardAuthorizer):
            bindings = await trio.to_thread.run_sync(self.load)
            authorizer.replace_acls(bindings)
            log.info("reloaded %d ACLs changed by another process", len(bindings))
        self._seen = signature

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A service: follow the other processes' changes until cancelled."""
        task_status.started()
        while True:
            await trio.sleep(self.poll_interval_s)
            async with self._local:
                try:
                    await self.reload_if_changed()
                except (OSError, ValueError):
                    log.exception("cannot reload %s", self.path)


class _ExclusiveChange(contextlib.AbstractAsyncContextManager[object]):
    """`async with store.lock`: this process's lock, then the file lock; the ACLs are
    re-read first when another process changed them, so the change builds on them."""

    def __init__(self, store: SharedAclStore) -> None:
        self._store = store
        self._fd = -1

    async def __aenter__(self) -> SharedAclStore:
        store = self._store
        await store._local.acquire()
        try:
            self._fd = await trio.to_thread.run_sync(store._lock_file)
            try:
                await store.reload_if_changed()
            except BaseException:
                os.close(self._fd)
                raise
        except BaseException:
            store._local.release()
            raise
        return store

    async def __aexit__(self, *exc_info: object) -> None:
        store = self._store
        try:
            os.close(self._fd)
            store._seen = file_signature(store.path)
        finally:
            store._local.release()
