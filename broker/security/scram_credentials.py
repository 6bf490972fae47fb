"""SCRAM credentials, stored durably as Kafka stores them: salt, StoredKey, ServerKey and
iterations, never the password.

Kafka keeps them in the metadata log (UserScramCredentialRecord); a single broker keeps
them in one JSON file under the first log dir, replaced atomically on every change, so
a crash leaves the old or the new set, never a torn mix.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs
import trio

from broker.log._files import atomic_write, exclusive_flock

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "scram-credentials.json"
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
_FORMAT_VERSION = 1


@attrs.frozen
class ScramMechanismInfo:
    """A SCRAM mechanism: its Kafka type id (AlterUserScramCredentials) and hash."""

    name: str
    type_id: int
    hash_name: str


SCRAM_MECHANISMS: tuple[ScramMechanismInfo, ...] = (
    ScramMechanismInfo("SCRAM-SHA-256", 1, "sha256"),
    ScramMechanismInfo("SCRAM-SHA-512", 2, "sha512"),
)
MECHANISM_BY_NAME = {m.name: m for m in SCRAM_MECHANISMS}
MECHANISM_BY_TYPE = {m.type_id: m for m in SCRAM_MECHANISMS}


@attrs.frozen
class ScramCredential:
    """What the server needs to verify a SCRAM proof (RFC 5802 §3)."""

    salt: bytes = attrs.field(repr=False)
    stored_key: bytes = attrs.field(repr=False)
    server_key: bytes = attrs.field(repr=False)
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanismInfo, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials sends (the client salts and hashes) to what is
        stored: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(...)."""
        client_key = hmac.digest(salted_password, b"Client Key", mechanism.hash_name)
        stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
        server_key = hmac.digest(salted_password, b"Server Key", mechanism.hash_name)
        return cls(salt, stored_key, server_key, iterations)

    @classmethod
    def from_password(
        cls, mechanism: ScramMechanismInfo, password: str, salt: bytes, iterations: int
    ) -> ScramCredential:
        salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_json(self) -> dict[str, object]:
        return {
            "salt": base64.b64encode(self.salt).decode(),
            "stored_key": base64.b64encode(self.stored_key).decode(),
            "server_key": base64.b64encode(self.server_key).decode(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ScramCredential:
        return cls(
            base64.b64decode(str(data["salt"])),
            base64.b64decode(str(data["stored_key"])),
            base64.b64decode(str(data["server_key"])),
            int(str(data["iterations"])),
        )


class ScramCredentialStore:
    """Credentials per (user, mechanism), in memory and in `<log dir>/scram-credentials.json`.

    Reads happen on every SCRAM authentication (from the connection's task) and must
    not touch the disk; writes are rare (admin requests) and replace the file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._credentials: dict[tuple[str, str], ScramCredential] = {}
        if path.exists():
            self._credentials = self._load(path)

    @staticmethod
    def _load(path: Path) -> dict[tuple[str, str], ScramCredential]:
        data = json.loads(path.read_text(encoding="utf-8"))
        result: dict[tuple[str, str], ScramCredential] = {}
        for user, mechanisms in data.get("users", {}).items():
            for mechanism, credential in mechanisms.items():
                if mechanism in MECHANISM_BY_NAME:
                    result[(user, mechanism)] = ScramCredential.from_json(credential)
        log.info("loaded %d SCRAM credentials from %s", len(result), path)
        return result

    def reload(self) -> None:
        """Re-read the file (another process of a cluster changed it). Raises OSError or
        ValueError, leaving what authentications see unchanged. Read under the lock
        `apply` takes: a file read before one of this process's changes and taken after
        it would undo that change here until the next reload."""
        with exclusive_flock(self.path.with_name(self.path.name + ".lock")):
            self._credentials = self._load(self.path) if self.path.exists() else {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def users(self) -> list[str]:
        return sorted({user for user, _ in self._credentials})

    def mechanisms_of(self, user: str) -> list[tuple[str, int]]:
        """(mechanism, iterations) of every credential of `user`, in mechanism order."""
        return [
            (m.name, credential.iterations)
            for m in SCRAM_MECHANISMS
            if (credential := self._credentials.get((user, m.name))) is not None
        ]

    def apply(
        self,
        upserts: Mapping[tuple[str, str], ScramCredential],
        deletions: Iterable[tuple[str, str]],
    ) -> None:
        """Apply one AlterUserScramCredentials request's changes all together, durably.

        The file is written before memory changes, so a failed write (OSError) leaves
        both the file and what authentications see unchanged. The change is made under
        an exclusive lock on `<file>.lock` from the file as it is now, so processes of
        a cluster sharing the file never write over each other's changes.
        """
        with exclusive_flock(self.path.with_name(self.path.name + ".lock")):
            current = self._load(self.path) if self.path.exists() else {}
            updated = dict(current)
            for key in deletions:
                updated.pop(key, None)
            updated.update(upserts)
            self._write(updated)
            self._credentials = updated

    async def alter(
        self,
        upserts: Mapping[tuple[str, str], ScramCredential],
        deletions: Iterable[tuple[str, str]],
    ) -> None:
        """`apply` from the Trio loop (the lock and fsync block a worker thread); a
        store shared another way (ZooKeeper) writes there instead. Raises OSError."""
        await trio.to_thread.run_sync(self.apply, dict(upserts), list(deletions))

    def _write(self, credentials: Mapping[tuple[str, str], ScramCredential]) -> None:
        users: dict[str, dict[str, object]] = {}
        for (user, mechanism), credential in sorted(credentials.items()):
            users.setdefault(user, {})[mechanism] = credential.to_json()
        text = json.dumps({"version": _FORMAT_VERSION, "users": users}, indent=1, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, text.encode())
