"""The controller tells a restarted broker from one that stayed: a registration written
again (a new timestamp) between two reads of /brokers/ids, so a broker that came back
faster than the controller saw it leave is no longer counted as shutting down."""

from __future__ import annotations

from broker.coordination.broker_registration import BrokerEndpoint, BrokerRegistration
from broker.coordination.kafka_controller import restarted_brokers


def registration(node_id: int, timestamp_ms: int) -> BrokerRegistration:
    endpoint = BrokerEndpoint("PLAINTEXT", "PLAINTEXT", f"127.0.0.{node_id + 1}", 9092)
    return BrokerRegistration(node_id, (endpoint,), timestamp_ms=timestamp_ms)


def test_a_broker_registered_again_is_restarted_and_the_others_are_not() -> None:
    before = {1: registration(1, 100), 2: registration(2, 100), 3: registration(3, 100)}
    after = {1: registration(1, 100), 2: registration(2, 250), 4: registration(4, 300)}
    assert restarted_brokers(before, after) == {2}
    assert restarted_brokers(before, dict(before)) == frozenset()
