"""Files in the shared log dir that every process of a cluster keeps in memory.

A single broker owns its SCRAM credentials and client quotas alone; in a cluster each
process serves logins and enforces quotas from memory, while changes arrive at any
process. Each process therefore follows the file: it checks the file's signature
(inode, size, mtime) once per `cluster.metadata.poll.interval.ms` and reloads it when
another process replaced it, as it does the shared ACLs. No busy polling: one stat per
interval per file.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

log = logging.getLogger(__name__)

Signature = tuple[int, int, int] | None
_NOT_CHECKED: object = object()


def file_signature(path: Path) -> Signature:
    """What changes when a file is replaced or rewritten; None when there is none."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


class SharedFileFollower:
    """A service: calls `reload` whenever `path` changes, until cancelled.

    The first check always reloads: the process loaded the file before its follower
    started, and a change another process made in between would otherwise look like the
    file already seen. That reload is reported as a change only when the file differs
    from the one there at construction (at start-up, nothing changed). A failed reload (a file caught mid-replace reads whole, since
    writers replace it atomically; a malformed file) is logged and tried again at the
    next change."""

    def __init__(
        self, path: Path, reload: Callable[[], Awaitable[None]], poll_interval_s: float
    ) -> None:
        self.path = path
        self._reload = reload
        self._poll_interval_s = poll_interval_s
        self._seen: Signature | object = _NOT_CHECKED
        self._at_start = file_signature(path)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self._poll_interval_s)
            await self.check()

    async def check(self) -> None:
        signature = file_signature(self.path)
        if signature == self._seen:
            return
        changed = self._seen is not _NOT_CHECKED or signature != self._at_start
        self._seen = signature
        try:
            await self._reload()
        except (OSError, ValueError):
            log.exception("cannot reload %s changed by another process", self.path)
        else:
            if changed:
                log.info("reloaded %s changed by another process", self.path)
