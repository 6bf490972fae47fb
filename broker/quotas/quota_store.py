"""Client quotas on disk: `__client_quotas.json` in the first log dir.

Kafka keeps quotas in its metadata log; a single broker keeps them like its ACLs:
one JSON document replaced atomically and durably on every change, so a crash
leaves the old or the new set, never a mix. The processes of a cluster share the
file: a change is read, applied and written under an exclusive lock on
`__client_quotas.json.lock`, so two processes changing quotas at once never write
over each other's change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import trio

from broker.log._files import atomic_write, exclusive_flock
from broker.quotas.client_quota_configs import QuotaOp, apply_ops
from broker.quotas.client_quota_entity import ClientQuotaEntity

QUOTAS_FILE = "__client_quotas.json"
_VERSION = 1

Quotas = Iterable[tuple[ClientQuotaEntity, Mapping[str, float]]]


def encode_quotas(quotas: Quotas) -> bytes:
    document = {
        "version": _VERSION,
        "quotas": sorted(
            (
                {
                    "entity": [{"type": t, "name": n} for t, n in entity.entries],
                    "values": dict(sorted(values.items())),
                }
                for entity, values in quotas
            ),
            key=lambda q: json.dumps(q["entity"]),
        ),
    }
    return json.dumps(document, indent=1).encode()


def decode_quotas(data: bytes) -> dict[ClientQuotaEntity, dict[str, float]]:
    """Raises ValueError for a document that is not ours."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("version") != _VERSION:
            raise ValueError("unknown client quota file format")
        return {
            ClientQuotaEntity(
                tuple(
                    sorted(
                        (str(e["type"]), None if e["name"] is None else str(e["name"]))
                        for e in quota["entity"]
                    )
                )
            ): {str(k): float(v) for k, v in quota["values"].items()}
            for quota in document["quotas"]
        }
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed client quota file: {exc!r}") from None


class QuotaStore:
    """The file, and a lock so that concurrent changes of this process are made in
    order (the file lock orders them between processes)."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / QUOTAS_FILE
        self.lock = trio.Lock()

    def load(self) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Every stored quota; a missing file is none. Raises OSError or ValueError."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            return decode_quotas(data)
        except ValueError as exc:
            raise ValueError(f"{self.path}: {exc}") from None

    def save_sync(self, quotas: Quotas) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, encode_quotas(quotas))

    def update_sync(
        self, changes: Mapping[ClientQuotaEntity, Sequence[QuotaOp]]
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Apply `changes` to the quotas as stored now, durably, under the file lock;
        returns every stored quota afterwards (other processes' changes included).
        Raises OSError or ValueError (a file that is not ours: nothing is written)."""
        with exclusive_flock(self.path.with_name(self.path.name + ".lock")):
            stored = self.load()
            for entity, ops in changes.items():
                values = apply_ops(stored.get(entity, {}), ops)
                if values:
                    stored[entity] = values
                else:
                    stored.pop(entity, None)
            self.save_sync(stored.items())
            return stored

    async def update(
        self, changes: Mapping[ClientQuotaEntity, Sequence[QuotaOp]]
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """`update_sync` in a worker thread (the lock and fsync block)."""
        snapshot = {entity: list(ops) for entity, ops in changes.items()}
        return await trio.to_thread.run_sync(self.update_sync, snapshot)
