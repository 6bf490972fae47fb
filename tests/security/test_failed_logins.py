"""Failed logins on real sockets: the KIP-306 delay holds no task or processor slot,
and whatever a client sends, the log stays small."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from broker.net.channel_security import ListenerSecurity
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from broker.server import KafkaServer
from tests.integration.broker_harness import connect, running_broker
from tests.security.helpers import PLAIN_JAAS, Certificates, make_certificates, open_tls
from tests.security.helpers import ssl_listener_settings as tls_settings
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def overrides(certs: Certificates, delay_ms: int) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": str(delay_ms),
        **tls_settings("SASL_SSL", certs),
    }


def security(server: KafkaServer, listener: str) -> ListenerSecurity:
    found = server.socket_server.security[listener]
    assert found is not None
    return found


def failed_total(server: KafkaServer, listener: str) -> float:
    return sum(
        meter.count
        for processor in server.socket_server.processors[listener]
        for event, meter in processor.auth_metrics.meters.items()
        if event.value == "failed-authentication"
    )


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
async def test_a_failed_login_waits_out_the_delay_without_a_connection_task(
    tmp_path: Path, certs: Certificates, listener: str
) -> None:
    delay_s = 1.5
    async with running_broker(tmp_path / "data", overrides(certs, int(delay_s * 1000))) as server:
        processors = server.socket_server.processors[listener]
        queue = security(server, listener).delayed_closes
        if listener == "SASL_SSL":
            connection = await open_tls(server.bound_port(listener), certs.client_context())
        else:
            connection = await connect(server, listener)
        async with connection:
            await connection.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
            started = trio.current_time()
            await connection.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2)
            # The processor forgets it; the queue holds the socket.
            await wait_until(
                lambda: not any(p.connections for p in processors) and len(queue) == 1, 10, 0.005
            )
            with trio.fail_after(10):
                _, response = await connection.receive()
            assert trio.current_time() - started >= delay_s
            assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            with trio.fail_after(5):  # closed: TLS without close_notify, as any broker close
                try:
                    assert await connection.stream.receive_some(1) == b""
                except trio.BrokenResourceError:
                    assert listener == "SASL_SSL"
        assert len(queue) == 0
        assert failed_total(server, listener) == 1


async def test_five_hundred_hostile_failures_write_a_bounded_log(
    tmp_path: Path, certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    huge = "M" * 10_000
    failures = 500

    async def fail_once(index: int) -> None:
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            await connection.request(ApiVersionsRequest(), 0)
            if index % 2:
                handshake = await connection.request(SaslHandshakeRequest(huge + "\n"), 1)
                assert handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            else:
                await connection.request(SaslHandshakeRequest("PLAIN"), 1)
                token = f"\0{huge}\r\n{index}\0wrong".encode()
                answer = await connection.request(SaslAuthenticateRequest(auth_bytes=token), 2)
                assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED

    async def worker(first: int, step: int) -> None:
        for index in range(first, failures, step):
            await fail_once(index)

    caplog.set_level(logging.INFO, logger="broker")
    async with running_broker(tmp_path / "data", overrides(certs, 20)) as server:
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for first in range(20):
                    nursery.start_soon(worker, first, 20)
        assert failed_total(server, "SASL_PLAINTEXT") == failures
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) <= 80, lines[-40:]
    assert max(map(len, lines)) <= 1_000
    assert sum(map(len, lines)) <= 40_000
    assert not any("\n" in line or "\r" in line for line in lines)
