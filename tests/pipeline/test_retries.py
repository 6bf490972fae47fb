"""The pipeline asks again on Kafka's "try again" errors only, a bounded number of times."""

from __future__ import annotations

import pytest

from broker.pipeline.kafka_client import KafkaClientError
from broker.pipeline.retries import on_retriable_errors
from broker.protocol.error_codes import ErrorCode


class Flaky:
    """Raises the scripted errors in turn, then answers."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, value: str) -> str:
        self.calls += 1
        if self.errors:
            raise KafkaClientError(self.errors.pop(0), "produce")
        return value


def test_retriable_errors_are_tried_again_until_an_answer() -> None:
    flaky = Flaky(ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)
    assert on_retriable_errors(attempts=5, delay_s=0)(flaky, "done") == "done"
    assert flaky.calls == 3


def test_the_last_retriable_error_is_raised_when_the_attempts_run_out() -> None:
    flaky = Flaky(*[ErrorCode.NOT_LEADER_OR_FOLLOWER] * 5)
    with pytest.raises(KafkaClientError, match="NOT_LEADER_OR_FOLLOWER"):
        on_retriable_errors(attempts=3, delay_s=0)(flaky, "done")
    assert flaky.calls == 3


def test_other_errors_are_raised_at_once() -> None:
    flaky = Flaky(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaClientError, match="TOPIC_AUTHORIZATION_FAILED"):
        on_retriable_errors(attempts=5, delay_s=0)(flaky, "done")
    assert flaky.calls == 1
