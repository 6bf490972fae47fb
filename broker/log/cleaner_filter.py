"""The record-level rules of one cleaning pass, sans-IO: which records and batches of a
compacted log survive, and the bytes of each rewritten batch.

Kafka's LogCleaner decides per record (`shouldRetainRecord`) and per batch
(`MemoryRecords.filterTo` with the cleaner's `RecordFilter`); this module holds the same
decisions over plain bytes so that tests can drive them with hypothesis and no files.

- A keyed record survives when no later record of the dirty range has its key
  (`OffsetMap`); a record without a key never survives (Kafka counts it invalid).
- A tombstone (null value) survives until its batch's delete horizon has passed: the
  first pass that keeps it stamps the batch with ``now + delete.retention.ms`` (KIP-534's
  delete-horizon flag, the batch's base timestamp then being the horizon), a later pass
  after that time drops it. Consumers that read the log from the start within
  delete.retention.ms therefore always see a key's deletion.
- Records of aborted transactions are dropped; a transaction marker whose transaction
  has no record left is stamped with a delete horizon like a tombstone and dropped after
  it (Kafka's "markers removed once safe").
- Rewritten batches keep their base offset, last offset delta, producer id, epoch, base
  sequence and leader epoch, so offsets stay where they were (the log gets holes) and
  the idempotent producer's sequence bookkeeping still matches. A producer's last batch
  is kept even when emptied, as an empty batch, like Kafka, so its sequence survives a
  rebuild of the producer state from the log.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from broker.log.transaction_index import AbortedTxn
from broker.protocol.compression import CompressionType
from broker.protocol.record_batch.encoder import encode_batch, encode_empty_batch
from broker.protocol.record_batch.layout import (
    COMPRESSION_MASK,
    DELETE_HORIZON_FLAG,
    RecordBatchHeader,
    set_crc_covered_fields,
)
from broker.protocol.record_batch.record_sinks import Record, decode_records, record_keys


class OffsetMap:
    """key -> offset of its latest record in the dirty range (Kafka's SkimpyOffsetMap,
    here a dict bounded by entry count: log.cleaner.dedupe.buffer.size / 24)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.latest: dict[bytes, int] = {}
        self.last_offset = -1

    @property
    def is_full(self) -> bool:
        return len(self.latest) >= self.max_entries

    def add_batch(self, batch: bytes | bytearray | memoryview, header: RecordBatchHeader) -> None:
        """Record every keyed data record of a batch (control batches carry no keys
        of the topic). Raises InvalidRecordsError for records that do not decode."""
        if not header.is_control:
            base = header.base_offset
            latest = self.latest
            for key, offset_delta, _ in record_keys(batch, header):
                if key is not None:
                    latest[key] = base + offset_delta
        self.last_offset = max(self.last_offset, header.last_offset)


@attrs.define
class PassState:
    """What a pass learns while walking the log in order: aborted transactions still
    open at this point, transactions that kept at least one record, and each
    producer's last batch (never removed entirely)."""

    aborted: dict[int, list[AbortedTxn]] = attrs.Factory(dict)
    txn_has_records: dict[int, bool] = attrs.Factory(dict)
    last_batch_of_producer: dict[int, int] = attrs.Factory(dict)

    def add_aborted(self, entries: Iterable[AbortedTxn]) -> None:
        for entry in entries:
            self.aborted.setdefault(entry.producer_id, []).append(entry)

    def is_aborted(self, header: RecordBatchHeader) -> bool:
        return any(
            entry.first_offset <= header.base_offset <= entry.last_offset
            for entry in self.aborted.get(header.producer_id, ())
        )


@attrs.frozen
class CleanResult:
    """The batch to write (None: drop it) and what it retained."""

    data: bytes | bytearray | memoryview | None
    records_in: int
    records_out: int


def clean_batch(
    batch: bytes | bytearray | memoryview,
    header: RecordBatchHeader,
    offsets: OffsetMap,
    state: PassState,
    *,
    now_ms: int,
    delete_retention_ms: int,
) -> CleanResult:
    """Apply the cleaner's rules to one batch of the cleanable range (in log order).

    Raises InvalidRecordsError when the batch's records do not decode (a corrupt
    segment: the caller skips the partition)."""
    horizon_passed = header.has_delete_horizon and now_ms >= header.base_timestamp
    if header.is_control:
        return _clean_marker(batch, header, state, now_ms, delete_retention_ms, horizon_passed)
    if not (header.is_transactional and state.is_aborted(header)) and _all_kept(
        batch, header, offsets, horizon_passed
    ):
        if header.is_transactional and header.record_count:
            state.txn_has_records[header.producer_id] = True
        return CleanResult(batch, header.record_count, header.record_count)
    records = decode_records(batch, header)
    keep_producer_batch = (
        header.producer_id >= 0
        and state.last_batch_of_producer.get(header.producer_id) == header.last_offset
    )
    if header.is_transactional and state.is_aborted(header):
        kept: list[Record] = []
    else:
        kept = [
            record
            for record in records
            if record.key is not None
            and offsets.latest.get(record.key, -1) <= header.base_offset + record.offset_delta
            and not (record.value is None and horizon_passed)
        ]
    if header.is_transactional and kept:
        state.txn_has_records[header.producer_id] = True
    needs_horizon = any(r.value is None for r in kept) and not header.has_delete_horizon
    if len(kept) == len(records) and not needs_horizon:
        return CleanResult(batch, len(records), len(kept))
    if not kept:
        if keep_producer_batch:
            return CleanResult(encode_empty_batch(header), len(records), 0)
        return CleanResult(None, len(records), 0)
    horizon = now_ms + delete_retention_ms if needs_horizon else None
    return CleanResult(_rebuild(header, kept, horizon), len(records), len(kept))


def _all_kept(
    batch: bytes | bytearray | memoryview,
    header: RecordBatchHeader,
    offsets: OffsetMap,
    horizon_passed: bool,
) -> bool:
    """Whether the batch stays as it is: every record keyed and latest, and no
    tombstone that is due to go or still needs its delete horizon (the common case
    of a clean section cleaned again, decided without decoding the records)."""
    base = header.base_offset
    latest = offsets.latest
    for key, offset_delta, tombstone in record_keys(batch, header):
        if key is None or latest.get(key, -1) > base + offset_delta:
            return False
        if tombstone and (horizon_passed or not header.has_delete_horizon):
            return False
    return True


def _clean_marker(
    batch: bytes | bytearray | memoryview,
    header: RecordBatchHeader,
    state: PassState,
    now_ms: int,
    delete_retention_ms: int,
    horizon_passed: bool,
) -> CleanResult:
    """A COMMIT/ABORT marker ends its producer's transaction here: its aborted range
    (if any) is closed, and the marker may go once no record of it is left."""
    producer = header.producer_id
    had_records = state.txn_has_records.pop(producer, False)
    entries = state.aborted.get(producer)
    if entries:
        state.aborted[producer] = [e for e in entries if e.last_offset > header.base_offset]
    if had_records:
        return CleanResult(batch, header.record_count, header.record_count)
    if horizon_passed:
        return CleanResult(None, header.record_count, 0)
    if header.has_delete_horizon:
        return CleanResult(batch, header.record_count, header.record_count)
    records = decode_records(batch, header)
    horizon = now_ms + delete_retention_ms
    return CleanResult(_rebuild(header, records, horizon), len(records), len(records))


def _rebuild(header: RecordBatchHeader, records: list[Record], horizon: int | None) -> bytearray:
    """The batch re-encoded with only ``records``, its identity kept (offsets, producer
    id/epoch/sequence, leader epoch, max timestamp). With ``horizon`` the batch gets
    KIP-534's delete-horizon flag and the horizon as base timestamp, each record's
    timestamp delta moved so that its absolute timestamp does not change."""
    base_timestamp = header.base_timestamp
    if horizon is not None:
        records = [
            attrs.evolve(r, timestamp_delta=base_timestamp + r.timestamp_delta - horizon)
            for r in records
        ]
        base_timestamp = horizon
    data = bytearray(
        encode_batch(
            records,
            base_offset=header.base_offset,
            compression=CompressionType(header.attributes & COMPRESSION_MASK),
            base_timestamp=base_timestamp,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            partition_leader_epoch=header.partition_leader_epoch,
            timestamp_type=header.timestamp_type,
        )
    )
    set_crc_covered_fields(
        data,
        0,
        attributes=header.attributes | (DELETE_HORIZON_FLAG if horizon is not None else 0),
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp,
    )
    return data
