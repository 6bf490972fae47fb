"""What the coordinator knows about one transactional id (Kafka's TransactionMetadata),
and the checks and moves of its state machine, sans-IO.

The coordinator asks this class what a request may do (`check_producer`,
`prepare_*`) and records the outcome; it never changes fields directly, so every
move passes `transition_to`, which refuses the moves Kafka's state machine
forbids (an IllegalTransition is a coordinator bug, never a client error).

Offsets committed inside the transaction (TxnOffsetCommit) are held by the
group's coordinator (broker/coordinator/pending_txn_offsets.py), as Kafka keeps
them in `__consumer_offsets`; `pending_offsets` here is only read from journals
of an earlier version that held them in this record (committed on completion).
"""

from __future__ import annotations

from typing import Any

import attrs

from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_state import VALID_PREVIOUS_STATES, TransactionState

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1

TopicPartition = tuple[str, int]
PendingOffset = tuple[int, int, str]  # offset, leader epoch, metadata


class IllegalTransition(RuntimeError):
    """A move Kafka's TransactionState does not allow."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for the fencing bump: at MAX-1 a new id is needed."""
    return epoch >= MAX_EPOCH - 1


@attrs.define(slots=True, eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = attrs.field(factory=set)
    groups: set[str] = attrs.field(factory=set)
    pending_offsets: dict[str, dict[TopicPartition, PendingOffset]] = attrs.field(factory=dict)
    start_ms: int = -1
    last_update_ms: int = -1

    # -- checks ----------------------------------------------------------------------------
    def check_producer(self, producer_id: int, producer_epoch: int) -> ErrorCode:
        """AddPartitions/AddOffsets/EndTxn/TxnOffsetCommit: the request must come from the
        current producer id and epoch."""
        if producer_id != self.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != self.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.NONE

    def is_valid_expected_producer(self, producer_id: int) -> bool:
        """InitProducerId v3+ names the id the producer had (Kafka's isValidProducerId)."""
        return (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == self.producer_id
            or (producer_id == self.last_producer_id and is_epoch_exhausted(self.producer_epoch))
        )

    # -- moves -----------------------------------------------------------------------------
    def transition_to(self, state: TransactionState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(
                f"transactional id {self.transactional_id!r}: {self.state.value} -> {state.value}"
            )
        self.state = state
        self.last_update_ms = now_ms

    def bump_epoch(
        self, expected_epoch: int | None, new_producer_id: int | None, now_ms: int
    ) -> ErrorCode:
        """InitProducerId on a completed transaction (Kafka's prepareIncrementProducerEpoch):
        the next epoch, or a new producer id when the epoch is used up. A retry that
        names the previous epoch gets the current one again."""
        if (
            expected_epoch is not None
            and expected_epoch != NO_PRODUCER_EPOCH
            and self.producer_epoch != NO_PRODUCER_EPOCH
            and expected_epoch != self.producer_epoch
        ):
            if expected_epoch == self.last_producer_epoch:
                return ErrorCode.NONE  # a retry: answer the current id and epoch
            return ErrorCode.PRODUCER_FENCED
        if new_producer_id is not None:
            self.last_producer_id = self.producer_id
            self.producer_id = new_producer_id
            self.last_producer_epoch = NO_PRODUCER_EPOCH
            self.producer_epoch = 0
        else:
            self.last_producer_epoch = self.producer_epoch
            self.producer_epoch += 1
        self._reset_transaction()
        self.transition_to(TransactionState.EMPTY, now_ms)
        return ErrorCode.NONE

    def fence_epoch(self, now_ms: int) -> None:
        """Abort an open transaction on the producer's behalf (timeout, or a new
        producer instance): bump the epoch so the old instance is fenced
        (Kafka's prepareFenceProducerEpoch)."""
        self.transition_to(TransactionState.PREPARE_EPOCH_FENCE, now_ms)
        if not is_epoch_exhausted(self.producer_epoch):
            self.producer_epoch += 1

    def add_partitions(self, partitions: set[TopicPartition], now_ms: int) -> None:
        self._begin(now_ms)
        self.partitions |= partitions

    def add_group(self, group_id: str, now_ms: int) -> None:
        self._begin(now_ms)
        self.groups.add(group_id)

    def _begin(self, now_ms: int) -> None:
        if self.state is not TransactionState.ONGOING:
            self._reset_transaction()
            self.start_ms = now_ms
        self.transition_to(TransactionState.ONGOING, now_ms)

    def prepare_end(self, commit: bool, now_ms: int) -> None:
        self.transition_to(
            TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT, now_ms
        )

    def complete(self, now_ms: int) -> None:
        if self.state is TransactionState.PREPARE_COMMIT:
            self.transition_to(TransactionState.COMPLETE_COMMIT, now_ms)
        else:
            self.transition_to(TransactionState.COMPLETE_ABORT, now_ms)
        self._reset_transaction()

    def _reset_transaction(self) -> None:
        self.partitions = set()
        self.groups = set()
        self.pending_offsets = {}
        self.start_ms = -1

    # -- persistence -----------------------------------------------------------------------
    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.transactional_id,
            "pid": self.producer_id,
            "epoch": self.producer_epoch,
            "lpid": self.last_producer_id,
            "lepoch": self.last_producer_epoch,
            "timeout": self.timeout_ms,
            "state": self.state.value,
            "parts": sorted([t, p] for t, p in self.partitions),
            "groups": sorted(self.groups),
            "offsets": {
                group: [[t, p, *value] for (t, p), value in offsets.items()]
                for group, offsets in self.pending_offsets.items()
            },
            "start": self.start_ms,
            "update": self.last_update_ms,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> TransactionMetadata:
        return cls(
            transactional_id=str(record["id"]),
            producer_id=int(record["pid"]),
            producer_epoch=int(record["epoch"]),
            timeout_ms=int(record["timeout"]),
            state=TransactionState(record["state"]),
            last_producer_id=int(record["lpid"]),
            last_producer_epoch=int(record["lepoch"]),
            partitions={(str(t), int(p)) for t, p in record["parts"]},
            groups={str(g) for g in record["groups"]},
            pending_offsets={
                str(group): {(str(t), int(p)): (int(o), int(e), str(m)) for t, p, o, e, m in items}
                for group, items in record["offsets"].items()
            },
            start_ms=int(record["start"]),
            last_update_ms=int(record["update"]),
        )
