"""Credentials over time: they survive a restart, and librdkafka re-authenticates
(KIP-368) within `connections.max.reauth.ms` instead of being disconnected."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Producer

from broker.metrics import Meter
from broker.protocol.error_codes import ErrorCode
from broker.server import KafkaServer
from tests.integration.broker_harness import connect, running_broker
from tests.interop.kafka_clients import create_topic, unique_topic
from tests.security.helpers import create_scram_user, sasl_authenticate

LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
}


def meter_total(server: KafkaServer, listener: str, name: str) -> float:
    total = 0.0
    for processor in server.socket_server.processors[listener]:
        for event, meter in processor.auth_metrics.meters.items():
            if event.value == name and isinstance(meter, Meter):
                total += meter.count
    return total


async def test_scram_users_survive_a_restart(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path / "data", LISTENERS) as server,
        await connect(server, "PLAINTEXT") as admin,
    ):
        await create_scram_user(admin, "dora", "dora-pw")
    async with (
        running_broker(tmp_path / "data", LISTENERS) as server,
        await connect(server, "SASL_PLAINTEXT") as connection,
    ):
        result = await sasl_authenticate(connection, "SCRAM-SHA-256", "dora", "dora-pw")
        assert result.authenticate_error == ErrorCode.NONE


@pytest.mark.interop
async def test_librdkafka_reauthenticates_before_its_session_expires(tmp_path: Path) -> None:
    settings = {**LISTENERS, "connections.max.reauth.ms": "1500"}
    async with running_broker(tmp_path / "data", settings) as server:
        async with await connect(server, "PLAINTEXT") as admin:
            await create_scram_user(admin, "erin", "erin-pw")
        admin_bootstrap = f"127.0.0.1:{server.bound_port('PLAINTEXT')}"
        bootstrap = f"127.0.0.1:{server.bound_port('SASL_PLAINTEXT')}"
        topic = unique_topic("reauth")
        await trio.to_thread.run_sync(create_topic, admin_bootstrap, topic)

        def produce_for(seconds: float) -> tuple[int, list[Any]]:
            errors: list[Any] = []
            producer = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "broker.address.family": "v4",
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.username": "erin",
                    "sasl.password": "erin-pw",
                    "linger.ms": 5,
                    "error_cb": errors.append,
                    "log_level": 3,
                }
            )
            delivered = 0

            def report(err: Any, _msg: Any) -> None:
                nonlocal delivered
                if err is None:
                    delivered += 1
                else:
                    errors.append(err)

            deadline = time.monotonic() + seconds
            sent = 0
            while time.monotonic() < deadline and sent < 100_000:
                producer.produce(topic, b"x" * 100, on_delivery=report)
                sent += 1
                producer.poll(0.02)
            assert producer.flush(20) == 0
            return delivered, errors

        delivered, errors = await trio.to_thread.run_sync(produce_for, 4.0)
        assert delivered > 0
        assert not errors, errors
        assert meter_total(server, "SASL_PLAINTEXT", "successful-reauthentication") >= 1
        assert meter_total(server, "SASL_PLAINTEXT", "expired-connections-killed-count") == 0
        assert meter_total(server, "SASL_PLAINTEXT", "failed-reauthentication") == 0
