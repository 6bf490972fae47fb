"""Error-code conversions the transaction APIs share (Kafka's KafkaApis)."""

from __future__ import annotations

from broker.protocol.error_codes import ErrorCode


def producer_fenced_for(version: int, fenced_from: int, error: int) -> int:
    """PRODUCER_FENCED is new in each API's version `fenced_from` (KIP-588); older
    clients understand INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and version < fenced_from:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
