"""The refusal every record-batch check raises, with the code a Produce answers."""

from __future__ import annotations

from broker.protocol.error_codes import ErrorCode

# Kafka answers a record that does not parse with INVALID_RECORD ("Found invalid
# record structure", DefaultRecord.readFrom); this broker reports malformed
# record data as CORRUPT_MESSAGE by design choice. One constant to flip.
RECORD_DECODE_ERROR = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordsError(Exception):
    """A record set the broker must refuse, with the code a Produce answers.

    ``record_index`` names the record at fault when one is (Kafka's RecordError,
    answered in the partition's record_errors)."""

    def __init__(
        self, error_code: ErrorCode, message: str, record_index: int | None = None
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.record_index = record_index

    def __repr__(self) -> str:
        return f"InvalidRecordsError({self.error_code.name}, {self.message!r})"


def corrupt(message: str) -> InvalidRecordsError:
    return InvalidRecordsError(ErrorCode.CORRUPT_MESSAGE, message)


def invalid(message: str) -> InvalidRecordsError:
    return InvalidRecordsError(ErrorCode.INVALID_RECORD, message)
