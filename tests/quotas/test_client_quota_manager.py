"""The quota manager without a network: precedence, windows and throttle times."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.quotas.client_quota_entity import (
    MetricTags,
    client_entity,
    precedence,
    user_client_entity,
    user_entity,
    user_of,
)
from broker.quotas.client_quota_manager import INACTIVE_SENSOR_EXPIRATION_S, ClientQuotaManager

ALL_ENTITIES = [
    user_client_entity("alice", "app"),
    user_client_entity("alice", None),
    user_entity("alice"),
    user_client_entity(None, "app"),
    user_client_entity(None, None),
    user_entity(None),
    client_entity("app"),
    client_entity(None),
]


def manager(samples: int = 11, window_s: float = 1.0) -> ClientQuotaManager:
    return ClientQuotaManager("producer_byte_rate", window_s, samples, clock=lambda: 0.0)


@given(st.sets(st.integers(0, len(ALL_ENTITIES) - 1), min_size=1))
def test_the_most_specific_configured_entity_binds_the_client(configured: set[int]) -> None:
    quotas = manager()
    for index in configured:
        quotas.update_quota(ALL_ENTITIES[index], 1000.0 + index)
    assert quotas.quota_limit("alice", "app") == 1000.0 + min(configured)


def test_precedence_is_kafkas_order_from_user_and_client_to_client_default() -> None:
    assert [entity for entity, _ in precedence("alice", "app")] == ALL_ENTITIES


def test_a_user_quota_is_shared_by_all_its_client_ids_and_a_client_default_is_not() -> None:
    quotas = manager()
    quotas.update_quota(user_entity(None), 100.0)
    assert quotas.binding("alice", "a").tags == quotas.binding("alice", "b").tags
    assert quotas.binding("alice", "a").tags == MetricTags("alice", "")
    quotas = manager()
    quotas.update_quota(client_entity(None), 100.0)
    assert quotas.binding("alice", "a").tags != quotas.binding("alice", "b").tags
    assert quotas.binding("alice", "a").tags == MetricTags("", "a")


def test_clients_without_a_matching_quota_are_never_throttled() -> None:
    quotas = manager()
    quotas.update_quota(client_entity("other"), 10.0)
    assert quotas.record_and_get_throttle_ms("alice", "app", 1e9, now=0.0) == 0
    assert quotas.max_value_in_quota_window("alice", "app") == math.inf


def test_removing_a_quota_unbinds_its_clients() -> None:
    quotas = manager()
    quotas.update_quota(client_entity("app"), 10.0)
    assert quotas.quota_limit("", "app") == 10.0
    quotas.update_quota(client_entity("app"), None)
    assert quotas.quota_limit("", "app") is None
    assert not quotas.enabled


def test_a_fresh_client_may_burst_samples_minus_one_windows_of_quota() -> None:
    quotas = manager(samples=11)
    quotas.update_quota(client_entity("app"), 1000.0)
    assert quotas.record_and_get_throttle_ms("", "app", 10_000, now=0.0) == 0
    assert quotas.record_and_get_throttle_ms("", "app", 1, now=0.0) > 0


@given(
    bound=st.floats(100, 1e7),
    excess=st.floats(1.01, 50),
    samples=st.integers(2, 20),
)
def test_the_throttle_brings_the_measured_rate_back_to_the_quota(
    bound: float, excess: float, samples: int
) -> None:
    quotas = manager(samples=samples)
    quotas.update_quota(client_entity("app"), bound)
    span = samples - 1  # windows a fresh sensor measures over
    throttle_ms = quotas.record_and_get_throttle_ms("", "app", bound * span * excess, now=0.0)
    # Waiting out the throttle with nothing more recorded leaves the rate at the quota.
    expected_ms = (excess - 1) * span * 1000
    assert throttle_ms == pytest.approx(expected_ms, rel=1e-6, abs=1)
    rate_after = bound * span * excess / (span + throttle_ms / 1000)
    assert rate_after == pytest.approx(bound, rel=1e-3)


def test_request_throttles_are_bounded_by_one_window_as_in_kafka() -> None:
    quotas = ClientQuotaManager(
        "request_percentage", 1.0, 11, max_throttle_ms=1000.0, clock=lambda: 0.0
    )
    quotas.update_quota(client_entity("app"), 1.0)
    assert quotas.record_and_get_throttle_ms("", "app", 1e6, now=0.0) == 1000


def test_windows_older_than_the_sample_span_are_forgotten() -> None:
    quotas = manager(samples=3)
    quotas.update_quota(client_entity("app"), 100.0)
    assert quotas.record_and_get_throttle_ms("", "app", 1000, now=0.0) > 0
    assert quotas.record_and_get_throttle_ms("", "app", 150, now=3.5) == 0


def test_unrecording_takes_back_a_value() -> None:
    quotas = manager(samples=3)
    quotas.update_quota(client_entity("app"), 100.0)
    assert quotas.record_and_get_throttle_ms("", "app", 1000, now=0.0) > 0
    quotas.unrecord("", "app", 1000, now=0.0)
    assert quotas.record_and_get_throttle_ms("", "app", 150, now=0.0) == 0


def test_fetches_are_capped_at_what_the_quota_allows_in_the_measured_span() -> None:
    quotas = manager(samples=11, window_s=2.0)
    quotas.update_quota(user_entity("alice"), 1000.0)
    assert quotas.max_value_in_quota_window("alice", "x") == 1000.0 * 10 * 2.0


def test_idle_sensors_expire_after_an_hour() -> None:
    quotas = manager()
    quotas.update_quota(client_entity(None), 1e9)
    quotas.record_and_get_throttle_ms("", "a", 1, now=0.0)
    assert [tags for tags, *_ in quotas.sensors(now=0.0)] == [MetricTags("", "a")]
    quotas.record_and_get_throttle_ms("", "b", 1, now=INACTIVE_SENSOR_EXPIRATION_S + 1)
    assert [tags for tags, *_ in quotas.sensors(now=0.0)] == [MetricTags("", "b")]


def test_throttle_time_metrics_keep_average_and_maximum() -> None:
    quotas = manager()
    quotas.update_quota(client_entity("app"), 10.0)
    quotas.record_throttle_time("", "app", 100, now=0.0)
    quotas.record_throttle_time("", "app", 300, now=0.5)
    [(tags, _, avg, top)] = list(quotas.sensors(now=1.0))
    assert (tags, avg, top) == (MetricTags("", "app"), 200.0, 300.0)


@pytest.mark.parametrize(
    ("principal", "user"),
    [("User:alice", "alice"), ("User:ANONYMOUS", "ANONYMOUS"), ("Group:x", "Group:x")],
)
def test_the_user_of_a_principal_is_its_name(principal: str, user: str) -> None:
    assert user_of(principal) == user
