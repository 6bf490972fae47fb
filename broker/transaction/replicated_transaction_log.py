"""The transaction coordinator's state in the replicated `__transaction_state` partition
instead of a journal file (hosts coordinated through ZooKeeper), as Kafka keeps it.

One record per state change, keyed by the transactional id so the topic compacts to the
last state of each id (a tombstone when the id expires); the value is the journal's JSON
record (`TransactionMetadata.to_record`), not Kafka's binary schema: only this broker
reads it. Records gather in an open round and are appended one round at a time by the
`OffsetReplicator` the group coordinator uses for `__consumer_offsets`; the coordinator
awaits `stored()` before it answers, so a state change is acknowledged once every
in-sync replica holds it (a failed append answers COORDINATOR_NOT_AVAILABLE or
NOT_COORDINATOR, as Kafka's TransactionStateManager maps them).

The partition's leader coordinates every transactional id; a broker that becomes it
reads the log back with `state_from_records` (Kafka's loadTransactionsForTxnTopicPartition).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from broker.coordinator.group_metadata_partition import GroupMetadataPartition, KeyedRecord
from broker.coordinator.replicated_offset_store import OffsetReplicator
from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_log import TransactionLog
from broker.transaction.transaction_metadata import TransactionMetadata

log = logging.getLogger(__name__)

TRANSACTION_STATE = "__transaction_state"


def keyed_record(metadata: TransactionMetadata) -> KeyedRecord:
    record = json.dumps(metadata.to_record(), separators=(",", ":"))
    return metadata.transactional_id.encode(), record.encode()


def state_from_records(records: Iterable[KeyedRecord]) -> dict[str, TransactionMetadata]:
    """The last state of every transactional id in the records (compacted or not);
    a record that is not ours is logged and skipped."""
    state: dict[str, TransactionMetadata] = {}
    for key, value in records:
        try:
            transactional_id = key.decode()
            if value is None:
                state.pop(transactional_id, None)
                continue
            metadata = TransactionMetadata.from_record(json.loads(value))
        except (UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            log.warning("skipping a record of %s that is not ours: %s", TRANSACTION_STATE, exc)
            continue
        state[metadata.transactional_id] = metadata
    return state


class ReplicatedTransactionLog(TransactionLog):
    """A `TransactionLog` whose records go to the replicated partition."""

    def __init__(self, partition: GroupMetadataPartition) -> None:
        super().__init__(Path(TRANSACTION_STATE))
        self.partition = partition
        self.replicator = OffsetReplicator(partition)

    def load(self) -> dict[str, TransactionMetadata]:
        """Nothing before this broker leads the partition (the service loads it then)."""
        return {}

    def write(self, metadata: TransactionMetadata) -> None:
        self.replicator.enqueue([keyed_record(metadata)])

    def write_removal(self, transactional_id: str) -> None:
        self.replicator.enqueue([(transactional_id.encode(), None)])

    async def stored(self) -> ErrorCode:
        pending = self.replicator.pending()
        return ErrorCode.NONE if pending is None else await pending.client_error()

    def needs_compaction(self) -> bool:
        return False  # the log cleaner compacts the topic

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None
