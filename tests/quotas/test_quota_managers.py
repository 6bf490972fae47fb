"""Throttling around the handlers (KIP-219), without a network: which responses carry
which throttle, what is recorded, and what a throttled fetch looks like."""

from __future__ import annotations

import time
from typing import Any

from broker.handlers.api_handler import CloseConnection, NoResponse
from broker.protocol.messages import (
    FetchRequest,
    FetchResponse,
    MetadataResponse,
    ProduceResponse,
)
from broker.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from broker.quotas.client_quota_entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    client_entity,
    ip_entity,
    user_entity,
)
from broker.quotas.quota_managers import QuotaManagers
from tests.handlers.request_factory import make_request


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def managers(**quotas: float) -> tuple[QuotaManagers, Clock]:
    clock = Clock()
    result = QuotaManagers(1.0, 3, clock=clock)
    result.set_quotas(client_entity("test"), quotas)
    return result, clock


def no_size(_: Any) -> int:
    raise AssertionError("the response size is only needed for a quota'd fetch")


def fetch_response(size: int) -> FetchResponse:
    return FetchResponse(
        session_id=0,
        responses=(
            FetchableTopicResponse(
                topic="t", partitions=(PartitionData(partition_index=0, records=b"x" * size),)
            ),
        ),
    )


def test_without_quotas_responses_go_out_untouched() -> None:
    quotas = QuotaManagers(1.0, 11)
    request = make_request(None, 0, 9)
    request.size_bytes = 10**9
    body = ProduceResponse()
    assert quotas.on_response(request, body, no_size) == (body, 0)


def test_a_produce_over_its_quota_is_answered_with_throttle_time_ms() -> None:
    quotas, _ = managers(**{PRODUCER_BYTE_RATE: 1000.0})
    request = make_request(None, 0, 9)
    request.size_bytes = 2000  # two windows' worth: exactly the burst allowed
    assert quotas.on_response(request, ProduceResponse(), no_size)[1] == 0
    request.size_bytes = 1000
    body, throttle_ms = quotas.on_response(request, ProduceResponse(), no_size)
    assert throttle_ms == 1000  # 3000 B over a 2 s span is 1.5x the quota: 1 s more
    assert body.throttle_time_ms == throttle_ms


def test_an_acks_zero_produce_still_throttles_the_channel() -> None:
    quotas, _ = managers(**{PRODUCER_BYTE_RATE: 1000.0})
    request = make_request(None, 0, 9)
    request.size_bytes = 4000
    outcome, throttle_ms = quotas.on_response(request, NoResponse(), no_size)
    assert isinstance(outcome, NoResponse)
    assert throttle_ms > 0


def test_a_closing_connection_is_not_throttled() -> None:
    quotas, _ = managers(**{PRODUCER_BYTE_RATE: 1.0})
    request = make_request(None, 0, 9)
    request.size_bytes = 4000
    close = CloseConnection("failed")
    assert quotas.on_response(request, close, no_size) == (close, 0)


def test_a_throttled_fetch_is_answered_empty_and_its_bytes_unrecorded() -> None:
    quotas, _clock = managers(**{CONSUMER_BYTE_RATE: 1000.0})
    request = make_request(FetchRequest(), 1, 12)
    response = fetch_response(5000)
    size = len(b"x" * 5000) + 100
    body, throttle_ms = quotas.on_response(request, response, lambda _: size)
    assert throttle_ms > 0
    assert body.throttle_time_ms == throttle_ms and body.responses == ()
    # Nothing was sent, so nothing counts: a small fetch right after is within the quota.
    body, throttle_ms = quotas.on_response(request, fetch_response(10), lambda _: 500)
    assert throttle_ms == 0 and body.responses


def test_a_fetch_is_capped_at_what_the_quota_allows_in_the_measured_span() -> None:
    quotas, _ = managers(**{CONSUMER_BYTE_RATE: 1000.0})
    request = make_request(FetchRequest(max_bytes=10**6, min_bytes=10**5), 1, 12)
    quotas.before_handle(request)
    assert (request.body.max_bytes, request.body.min_bytes) == (2000, 2000)


def test_follower_fetches_are_exempt() -> None:
    quotas, _ = managers(**{CONSUMER_BYTE_RATE: 1.0})
    request = make_request(FetchRequest(replica_id=2, max_bytes=10**6), 1, 12)
    quotas.before_handle(request)
    assert request.body.max_bytes == 10**6
    assert quotas.on_response(request, fetch_response(5000), no_size)[1] == 0


def test_request_time_over_request_percentage_throttles_any_api_within_one_window() -> None:
    quotas, _ = managers(**{REQUEST_PERCENTAGE: 1.0})
    request = make_request(None, 3, 12)
    request.dequeue_ns = 1
    request.api_local_complete_ns = 1 + 500_000_000  # 50% of a thread for a second
    body, throttle_ms = quotas.on_response(request, MetadataResponse(), no_size)
    assert 0 < throttle_ms <= 1000
    assert body.throttle_time_ms == throttle_ms
    [(_tags, rate, _avg, top)] = list(quotas.request.sensors())
    assert rate > 0 and top == throttle_ms


def test_the_larger_of_bandwidth_and_request_throttles_is_sent() -> None:
    quotas, _ = managers(**{PRODUCER_BYTE_RATE: 1000.0, REQUEST_PERCENTAGE: 1000.0})
    request = make_request(None, 0, 9)
    request.size_bytes = 10_000
    request.dequeue_ns = 1
    request.api_local_complete_ns = 2
    _, throttle_ms = quotas.on_response(request, ProduceResponse(), no_size)
    assert throttle_ms == quotas.produce.sensors().__next__()[3]


def test_user_quotas_follow_the_principal() -> None:
    quotas = QuotaManagers(1.0, 3, clock=Clock())
    quotas.set_quotas(user_entity("alice"), {PRODUCER_BYTE_RATE: 10.0})
    alice = make_request(None, 0, 9, principal="User:alice")
    bob = make_request(None, 0, 9, principal="User:bob")
    alice.size_bytes = bob.size_bytes = 1000
    assert quotas.on_response(alice, ProduceResponse(), no_size)[1] > 0
    assert quotas.on_response(bob, ProduceResponse(), no_size)[1] == 0


def test_ip_connection_rates_reach_their_listeners_now_and_on_change() -> None:
    quotas = QuotaManagers(1.0, 3)
    quotas.set_quotas(ip_entity(None), {"connection_creation_rate": 5.0})
    seen: list[tuple[str | None, float | None]] = []
    quotas.add_ip_rate_listener(lambda ip, rate: seen.append((ip, rate)))
    quotas.set_quotas(ip_entity("10.0.0.1"), {"connection_creation_rate": 2.0})
    quotas.set_quotas(ip_entity("10.0.0.1"), {})
    assert seen == [(None, 5.0), ("10.0.0.1", 2.0), ("10.0.0.1", None)]


def test_quota_metrics_use_kafkas_names_and_tags() -> None:
    quotas, _ = managers(**{PRODUCER_BYTE_RATE: 1000.0})
    request = make_request(None, 0, 9)
    request.size_bytes = 5000
    quotas.on_response(request, ProduceResponse(), no_size)
    names = {(s.type_, s.name, s.tags) for s in quotas.metric_samples()}
    tags = (("client-id", "test"), ("user", ""))
    assert names == {("Produce", "byte-rate", tags), ("Produce", "throttle-time", tags)}


def test_network_time_writing_a_response_counts_for_the_next_requests() -> None:
    quotas, _ = managers(**{REQUEST_PERCENTAGE: 1.0})
    request = make_request(None, 3, 12)
    record = quotas.on_sent(request)
    assert record is not None
    request.response_dequeue_ns = time.perf_counter_ns() - 200_000_000  # 0.2 s writing
    record()
    [(_tags, rate, _avg, _top)] = list(quotas.request.sensors())
    assert rate > 0


def test_without_a_request_quota_nothing_runs_after_the_send() -> None:
    quotas, _ = managers(**{PRODUCER_BYTE_RATE: 1.0})
    assert quotas.on_sent(make_request(None, 3, 12)) is None
