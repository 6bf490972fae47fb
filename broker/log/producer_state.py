"""Idempotent-producer state of one partition: the sans-IO rules and snapshots.

Kafka's ProducerStateManager / ProducerAppendInfo keep, per producer id, the
epoch and the metadata of the last five batches, which is what lets a producer
retry up to five in-flight requests without duplicating or reordering data. The
rules here follow ProducerAppendInfo for client (not replication) appends:

* a batch whose (epoch, first seq, last seq) equals one of the cached five is a
  duplicate: the caller answers the original offsets and appends nothing;
* an epoch below the current one -> INVALID_PRODUCER_EPOCH;
* a new epoch must start at sequence 0, unless the producer's state is unknown
  (never seen, or evicted by retention / DeleteRecords), where KIP-360 accepts any
  sequence so that a producer whose data aged out can continue;
* otherwise the first sequence must follow the last one (wrapping from int32 max
  to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER.

Transactions (Kafka's currentTxnFirstOffset and appendEndTxnMarker): the first
transactional batch of a producer opens its transaction at that batch's offset;
the COMMIT or ABORT marker closes it. The earliest open transaction bounds the
last stable offset; an ABORT marker yields the entry for the `.txnindex`. A
marker carrying a newer epoch (the coordinator fenced the producer) resets the
sequence state, so the zombie's later batches get INVALID_PRODUCER_EPOCH. Each marker's
coordinator epoch (the leader epoch of `__transaction_state` its coordinator loaded at) is
kept per producer: a marker from an older coordinator epoch is a zombie coordinator's,
late, and could close the producer's next transaction (TRANSACTION_COORDINATOR_FENCED).

Snapshots (`<offset>.snapshot`, the state as of that offset) are this broker's
own format, not Kafka's: magic ``PSNAP1``, CRC32C of the payload, then JSON with
all five batches per producer (Kafka snapshots keep only the last one, which
would weaken duplicate detection across restarts).
"""

from __future__ import annotations

import json
import struct
from collections import deque
from collections.abc import Iterator

import attrs
import crc32c

from broker.errors import KafkaError
from broker.log.transaction_index import AbortedTxn
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.layout import RecordBatchHeader

INT32_MAX = 2**31 - 1
NO_EPOCH = -1
MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
_MAGIC = b"PSNAP1"
_CRC = struct.Struct(">I")


def last_sequence(base_sequence: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap at int32 max."""
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@attrs.frozen(slots=True)
class BatchMetadata:
    """What a duplicate answers: the original batch's sequences, offsets, time."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@attrs.define(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = attrs.field(factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    coordinator_epoch: int = NO_EPOCH  # of the last marker

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class ProducerStateManager:
    """Per-producer state with validation separated from recording, so the log can
    check a batch, write it, and only then record it (a failed write leaves the
    state untouched)."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id -> first offset of its open transaction
        self.ongoing: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def check(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """Validate a client batch; return the original batch when it is a duplicate.

        Raises KafkaError INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER.
        """
        entry = self.producers.get(header.producer_id)
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        if entry is None:
            return None  # unknown producer: any sequence starts it (KIP-360)
        duplicate = entry.find_duplicate(
            epoch, first_seq, last_sequence(first_seq, header.last_offset_delta)
        )
        if duplicate is not None:
            return duplicate
        if epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch of producer {header.producer_id} is {epoch}, which is smaller than "
                f"the last seen epoch {entry.epoch}",
            )
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"invalid sequence number for new epoch of producer {header.producer_id}: "
                    f"{epoch} (request epoch), {first_seq} (seq. number), {entry.epoch} "
                    "(current producer epoch)",
                )
        elif entry.batches and not in_sequence(entry.last_seq, first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for producer {header.producer_id} at offset "
                f"{header.base_offset}: {first_seq} (incoming seq. number), "
                f"{entry.last_seq} (current end sequence number)",
            )
        return None

    def record(self, header: RecordBatchHeader, timestamp: int) -> None:
        """Remember a batch written to the log (offsets assigned). No validation:
        also used to rebuild state from the log after an unclean shutdown."""
        if header.producer_id < 0:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
            self.producers[header.producer_id] = entry
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                last_sequence(header.base_sequence, header.last_offset_delta),
                header.base_offset,
                header.last_offset,
                timestamp,
            )
        )
        if header.is_transactional and header.producer_id not in self.ongoing:
            self.ongoing[header.producer_id] = header.base_offset

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int = NO_EPOCH) -> None:
        """A marker from an older epoch than the partition has seen is a fenced
        coordinator request (Kafka: PRODUCER_FENCED / INVALID_PRODUCER_EPOCH); one from
        an older coordinator epoch comes from a coordinator that has been replaced
        (Kafka's ProducerAppendInfo.checkCoordinatorEpoch)."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker epoch {epoch} of producer {producer_id} is older than {entry.epoch}",
            )
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}",
            )

    def record_marker(
        self,
        producer_id: int,
        epoch: int,
        marker_offset: int,
        commit: bool,
        log_end: int,
        coordinator_epoch: int = NO_EPOCH,
    ) -> AbortedTxn | None:
        """Close the producer's open transaction at a COMMIT/ABORT marker. Returns the
        aborted-transaction entry when an open transaction was aborted."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        first = self.ongoing.pop(producer_id, None)
        if first is None or commit:
            return None
        return AbortedTxn(producer_id, first, marker_offset, self.first_unstable_offset(log_end))

    def first_unstable_offset(self, log_end: int) -> int:
        """The last stable offset: the first offset of the earliest open transaction,
        or the log end when none is open."""
        return min(self.ongoing.values(), default=log_end)

    def evict_below(self, log_start_offset: int) -> None:
        """Forget producers whose data is all below the log start (retention,
        DeleteRecords), as Kafka does; they may then restart at any sequence."""
        stale = [
            pid for pid, entry in self.producers.items() if entry.last_offset < log_start_offset
        ]
        for pid in stale:
            del self.producers[pid]
            self.ongoing.pop(pid, None)

    # ------------------------------------------------------------ snapshots

    def to_bytes(self) -> bytes:
        payload = json.dumps(
            [
                [
                    e.producer_id,
                    e.epoch,
                    [attrs.astuple(b) for b in e.batches],
                    self.ongoing.get(e.producer_id, -1),
                    e.coordinator_epoch,
                ]
                for e in self.producers.values()
            ],
            separators=(",", ":"),
        ).encode()
        return _MAGIC + _CRC.pack(crc32c.crc32c(payload)) + payload

    @classmethod
    def from_bytes(cls, data: bytes) -> ProducerStateManager:
        """Raises ValueError for a torn or corrupt snapshot (the caller falls back
        to an older snapshot or to the log)."""
        if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _CRC.size:
            raise ValueError("not a producer state snapshot")
        (crc,) = _CRC.unpack_from(data, len(_MAGIC))
        payload = data[len(_MAGIC) + _CRC.size :]
        if crc32c.crc32c(payload) != crc:
            raise ValueError("producer state snapshot checksum mismatch")
        manager = cls()
        try:
            for pid, epoch, batches, *rest in json.loads(payload):
                entry = ProducerStateEntry(int(pid), int(epoch))
                for batch in batches:
                    entry.batches.append(BatchMetadata(*(int(x) for x in batch)))
                manager.producers[entry.producer_id] = entry
                if rest and int(rest[0]) >= 0:
                    manager.ongoing[entry.producer_id] = int(rest[0])
                if len(rest) > 1:  # written since coordinator epochs are kept
                    entry.coordinator_epoch = int(rest[1])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed producer state snapshot: {exc}") from exc
        return manager

    def entries(self) -> Iterator[ProducerStateEntry]:
        return iter(self.producers.values())


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"
