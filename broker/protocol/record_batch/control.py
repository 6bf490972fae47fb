"""Control records (Kafka's EndTransactionMarker): the COMMIT/ABORT batches a transaction
coordinator writes, key = version 0 and the marker type, value = version 0 and the
coordinator epoch."""

from __future__ import annotations

import struct

from broker.protocol.record_batch.encoder import encode_batch
from broker.protocol.record_batch.layout import Buffer, RecordBatchHeader
from broker.protocol.record_batch.record_sinks import Record, iter_records

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def control_batch(producer_id: int, epoch: int, commit: bool, coordinator_epoch: int) -> bytes:
    """A COMMIT/ABORT marker batch of the producer's transaction."""
    record = Record(
        offset_delta=0,
        timestamp_delta=0,
        key=_CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
    )
    return encode_batch(
        [record],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
    )


def control_coordinator_epoch(batch: Buffer, header: RecordBatchHeader) -> int:
    """The coordinator epoch a control batch's marker carries (-1 when unreadable)."""
    for record in iter_records(batch, header):
        if record.value is not None and len(record.value) >= _CONTROL_VALUE.size:
            epoch: int = _CONTROL_VALUE.unpack_from(record.value)[1]
            return epoch
    return -1


def control_type(batch: Buffer, header: RecordBatchHeader) -> int | None:
    """CONTROL_COMMIT / CONTROL_ABORT of a control batch (None when unreadable)."""
    for record in iter_records(batch, header):
        if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
            kind: int = _CONTROL_KEY.unpack_from(record.key)[1]
            return kind
    return None
