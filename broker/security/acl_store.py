"""ACLs on disk: `__acls.json` in the first log dir, loaded at start, rewritten on change.

Kafka keeps ACLs in its metadata log; a single broker keeps them the way it
keeps topic metadata (see topic_store): one JSON document replaced atomically
and durably, so a crash leaves either the old or the new set, never a mix.
Enum members are written by name so the file reads like `kafka-acls --list`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import trio

from broker.log._files import atomic_write
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

ACLS_FILE = "__acls.json"
_VERSION = 1


def encode_acls(bindings: Iterable[AclBinding]) -> bytes:
    document = {
        "version": _VERSION,
        "acls": sorted(
            (
                {
                    "resource_type": b.pattern.resource_type.name,
                    "name": b.pattern.name,
                    "pattern_type": b.pattern.pattern_type.name,
                    "principal": b.entry.principal,
                    "host": b.entry.host,
                    "operation": b.entry.operation.name,
                    "permission_type": b.entry.permission_type.name,
                }
                for b in bindings
            ),
            key=lambda acl: tuple(acl.values()),
        ),
    }
    return json.dumps(document, indent=1).encode()


def decode_acls(data: bytes) -> list[AclBinding]:
    """Raises ValueError for a document that is not ours."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("version") != _VERSION:
            raise ValueError("unknown ACL file format")
        return [
            AclBinding(
                ResourcePattern(
                    ResourceType[acl["resource_type"]],
                    str(acl["name"]),
                    PatternType[acl["pattern_type"]],
                ),
                AccessControlEntry(
                    str(acl["principal"]),
                    str(acl["host"]),
                    AclOperation[acl["operation"]],
                    AclPermissionType[acl["permission_type"]],
                ),
            )
            for acl in document["acls"]
        ]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed ACL file: {exc!r}") from None


class AclStore:
    """The file, and a lock so that concurrent changes are written in the order made."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / ACLS_FILE
        # Held while a change is computed and written (a cluster's store also locks the file).
        self.lock: AbstractAsyncContextManager[object] = trio.Lock()

    def load(self) -> list[AclBinding]:
        """Every stored ACL; a missing file is none. Raises OSError or ValueError."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            return decode_acls(data)
        except ValueError as exc:
            raise ValueError(f"{self.path}: {exc}") from None

    def save_sync(self, bindings: Iterable[AclBinding]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, encode_acls(bindings))

    async def save(self, bindings: Iterable[AclBinding]) -> None:
        """Write durably in a worker thread (fsync). Raises OSError."""
        snapshot = list(bindings)
        await trio.to_thread.run_sync(self.save_sync, snapshot)
