"""What `PartitionLog.append` and `PartitionLog.read` answer (docs/design/log-api.md)."""

from __future__ import annotations

import attrs

from broker.log.transaction_index import AbortedTxn


@attrs.frozen(slots=True)
class AppendResult:
    """Offsets a Produce response reports for one appended (or duplicate) batch.

    ``log_append_time_ms`` is -1 unless the topic uses LogAppendTime, as in Kafka's
    ProduceResponse. A duplicate answers the original batch's offsets so that a
    retrying idempotent producer sees exactly what the first attempt would have.
    """

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False


@attrs.frozen(slots=True)
class ReadResult:
    """Whole batches for a Fetch plus the watermarks the response carries."""

    records: bytes | memoryview
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
    """Set for read_committed reads: transactions aborted in the range read."""
