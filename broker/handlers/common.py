"""Small rules shared by several handlers, each as Kafka applies it."""

from __future__ import annotations

import re

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode

NO_EPOCH = -1
"""current_leader_epoch when the client does not know (or does not send) it."""

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""Kafka's value for authorized operations that were not requested."""

# Without an authorizer every operation a resource type supports is allowed; the
# bit field has bit N set for AclOperation code N (Utils.to32BitField).
_TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)  # READ..DESCRIBE, DESCRIBE/ALTER_CONFIGS
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in _TOPIC_OPERATIONS)

_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def topic_name_error(name: str) -> str | None:
    """Why Kafka's `Topic.validate` refuses `name`, or None when it is legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


def check_leader_epoch(requested: int, current: int) -> None:
    """Kafka's Partition.checkCurrentLeaderEpoch (KIP-320): a client with a newer
    epoch than ours is ahead of our metadata, one with an older epoch is fenced."""
    if requested in (NO_EPOCH, current):
        return
    if requested > current:
        raise KafkaError(
            ErrorCode.UNKNOWN_LEADER_EPOCH,
            f"requested leader epoch {requested} is newer than the current {current}",
        )
    raise KafkaError(
        ErrorCode.FENCED_LEADER_EPOCH,
        f"requested leader epoch {requested} is older than the current {current}",
    )


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code an exception stands for (UNKNOWN_SERVER_ERROR if none)."""
    return int(getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR))


def error_message_of(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc)
