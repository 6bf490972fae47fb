"""TxnOffsetCommit's pending offsets kept in the replicated `__consumer_offsets` partition
(hosts coordinated through ZooKeeper), as Kafka keeps them there until the marker.

One keyed record per (producer id, group) holds every offset the producer's open
transaction committed for the group (the journal's record, merged, so compaction keeps
the latest); the transaction's marker, delivered to the group coordinator, writes a
tombstone for each, after the committed offsets of a commit, in the same append. A new
coordinator reading the partition back so holds the open transactions' offsets, and
sees a committed transaction's offsets committed and none of an aborted one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from broker.coordinator.group_metadata_partition import CONSUMER_OFFSETS, KeyedRecord
from broker.coordinator.pending_txn_offsets import PendingTransactionalOffsets

log = logging.getLogger(__name__)

PENDING_KEY = "t"


def pending_key(producer_id: int, group_id: str) -> bytes:
    return json.dumps([PENDING_KEY, producer_id, group_id], separators=(",", ":")).encode()


def is_pending_key(key: bytes) -> bool:
    return key.startswith(b'["' + PENDING_KEY.encode() + b'",')


class ReplicatedPendingOffsets(PendingTransactionalOffsets):
    """Pending offsets whose records go to `sink` (the offsets' replicator)."""

    def __init__(self, sink: Callable[[list[KeyedRecord]], None]) -> None:
        super().__init__(Path(CONSUMER_OFFSETS))
        self._sink = sink

    def load(self) -> None:
        return None

    def reset(self, records: Iterable[KeyedRecord]) -> None:
        """Forget the state and rebuild it from the partition's pending records."""
        self.by_producer = {}
        self.epochs = {}
        for key, value in records:
            try:
                _, producer_id, group = json.loads(key)
                if value is None:
                    groups = self.by_producer.get(int(producer_id), {})
                    groups.pop(str(group), None)
                    if not groups:
                        self.by_producer.pop(int(producer_id), None)
                    continue
                self._apply(json.loads(value))
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("skipping a pending offset record that is not ours: %s", exc)

    def _append(self, record: dict[str, Any]) -> None:
        producer_id = int(record["pid"])
        if record.get("done"):
            groups = self.by_producer.get(producer_id, {})
            self._sink([(pending_key(producer_id, group), None) for group in sorted(groups)])
            return
        group = str(record["group"])
        held = dict(self.by_producer.get(producer_id, {}).get(group, {}))
        held.update({(str(t), int(p)): (o, e, m) for t, p, o, e, m in record["offsets"]})
        merged = dict(record, offsets=[[t, p, *value] for (t, p), value in sorted(held.items())])
        self._sink([(pending_key(producer_id, group), json.dumps(merged).encode())])

    def forget(self, producer_id: int, producer_epoch: int) -> None:
        done = {"pid": producer_id, "done": True, "epoch": producer_epoch}
        if producer_id in self.by_producer:
            self._append(done)
        self._apply(done)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None
