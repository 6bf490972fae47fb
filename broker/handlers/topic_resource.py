"""Looking a topic up by name for an admin request, with Kafka's errors."""

from __future__ import annotations

from broker.errors import KafkaError
from broker.handlers.common import topic_name_error
from broker.handlers.log_view import LogManagerView, TopicView
from broker.protocol.error_codes import ErrorCode


def find_topic(logs: LogManagerView, name: str) -> TopicView:
    """The topic, INVALID_TOPIC_EXCEPTION for an illegal name, else UNKNOWN_TOPIC_OR_PARTITION."""
    topic = logs.topic(name)
    if topic is not None:
        return topic
    reason = topic_name_error(name)
    if reason is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
