"""The broker's one exception for "answer with this Kafka error code".

Handlers and the log raise `KafkaError(ErrorCode.X, "why")`; the API layer
turns it into the API's error response (or a close where the API has none).
Anything else that escapes a handler is a bug, and answers
UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from broker.protocol.error_codes import ErrorCode


class KafkaError(Exception):
    """An error the client is told about by its Kafka error code."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message or error_code.name


class PeerUnavailable(Exception):
    """Another broker (a process of the cluster, or a host) could not be reached or did
    not answer an inter-broker request (it may be restarting)."""
