"""The pipeline's one retry policy: Kafka's retriable errors are tried again, briefly."""

from __future__ import annotations

import tenacity

from broker.pipeline.kafka_client import KafkaClientError


def _retriable(exc: BaseException) -> bool:
    return isinstance(exc, KafkaClientError) and exc.retriable


def on_retriable_errors(attempts: int, delay_s: float) -> tenacity.Retrying:
    """Call again on a retriable KafkaClientError (the broker said "try again"), `delay_s`
    apart, `attempts` calls in all; any other error, or the last one, is raised as is."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(_retriable),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_fixed(delay_s),
        reraise=True,
    )
