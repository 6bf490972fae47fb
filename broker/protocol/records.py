"""Kafka RecordBatch (magic v2), the public names gathered in one place.

The broker's hot path never decodes records: it checks a batch's framing and CRC from
the 61-byte header, rewrites the base offset and leader epoch in place (both sit outside
the CRC) and stores the bytes as the client sent them. Decoding records is for clients,
tests and the analytics pipeline. Everything is defined in ``broker/protocol/record_batch/``
(the layout in ``layout.py``, the record walk in ``walk.py``); this module only re-exports.
"""

from __future__ import annotations

from broker.protocol.record_batch.batch_checks import iter_batches, read_batch_header
from broker.protocol.record_batch.encoder import encode_batch
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import (
    BATCH_HEADER_SIZE,
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    RecordBatchHeader,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from broker.protocol.record_batch.record_sinks import (
    WALKER_BUILD,
    DecodedRecord,
    Record,
    decode_records,
    iter_records,
    validate_records,
)
from broker.protocol.record_batch.validator import validate_record_set

__all__ = [
    "BATCH_HEADER_SIZE",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "NO_TIMESTAMP",
    "WALKER_BUILD",
    "DecodedRecord",
    "InvalidRecordsError",
    "Record",
    "RecordBatchHeader",
    "decode_records",
    "encode_batch",
    "iter_batches",
    "iter_records",
    "read_batch_header",
    "set_base_offset",
    "set_log_append_time",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "validate_record_set",
    "validate_records",
]
