"""TLS and SASL listeners end to end: a real broker in this Trio run, real sockets,
our own codec as the client, and raw bytes for the bad cases."""

from __future__ import annotations

import contextlib
import random
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import scramp
import trio

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.metrics import Meter
from broker.net.request import Request
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from broker.server import KafkaServer
from tests.integration.broker_harness import connect, running_broker
from tests.security.helpers import (
    PLAIN_JAAS,
    Certificates,
    create_scram_user,
    make_certificates,
    open_tls,
    sasl_authenticate,
    ssl_listener_settings,
    subject_of_client,
)
from tests.trio_clock import at_real_speed, autojump
from tests.waiting import wait_until

LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
    "SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0"
)
PROTOCOLS = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


class PrincipalRecorder:
    """Metadata, recording the principal of every request it answers."""

    api_key = 3

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.min_version = inner.min_version
        self.max_version = inner.max_version
        self.principals: list[str] = []

    async def handle(self, request: Request) -> Any:
        self.principals.append(request.context.principal)
        return await self.inner.handle(request)

    def error_response(self, request: Request, error_code: int) -> Any:
        return self.inner.error_response(request, error_code)


@asynccontextmanager
async def secure_broker(
    tmp_path: Path, certs: Certificates, **extra: str
) -> AsyncIterator[tuple[KafkaServer, PrincipalRecorder]]:
    overrides = {
        "listeners": LISTENERS,
        "listener.security.protocol.map": PROTOCOLS,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "50",
        **ssl_listener_settings("SSL", certs),
        **ssl_listener_settings("SASL_SSL", certs),
        **ssl_listener_settings("MTLS", certs, "required"),
    }
    overrides.update({k.replace("__", "."): v for k, v in extra.items()})
    async with running_broker(tmp_path / "data", overrides) as server:
        recorder = PrincipalRecorder(server.metadata)
        server.apis.add_handler(recorder)
        async with await connect(server, "PLAINTEXT") as admin:
            await create_scram_user(admin, "carol", "carol-pw", "SCRAM-SHA-256")
            await create_scram_user(admin, "carol", "carol-pw", "SCRAM-SHA-512")
        yield server, recorder


def auth_total(server: KafkaServer, listener: str, name: str) -> float:
    total = 0.0
    for processor in server.socket_server.processors[listener]:
        for event, meter in processor.auth_metrics.meters.items():
            if event.value == name:
                assert isinstance(meter, Meter)
                total += meter.count
    return total


async def metadata(connection: KafkaConnection) -> Any:
    return await connection.request(MetadataRequest(topics=()), 4)


async def assert_closed(connection: KafkaConnection) -> None:
    with trio.fail_after(5), pytest.raises((ConnectionClosed, trio.BrokenResourceError)):
        await connection.receive_frame()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
async def test_sasl_plaintext_authenticates_and_requests_carry_the_user_principal(
    tmp_path: Path, certs: Certificates, mechanism: str
) -> None:
    user, password = ("alice", "alice-secret") if mechanism == "PLAIN" else ("carol", "carol-pw")
    async with secure_broker(tmp_path, certs) as (server, recorder):
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            result = await sasl_authenticate(connection, mechanism, user, password)
            assert (result.handshake_error, result.authenticate_error) == (0, 0)
            assert (await metadata(connection)).brokers
        assert recorder.principals == [f"User:{user}"]
        assert auth_total(server, "SASL_PLAINTEXT", "successful-authentication") == 1
        assert auth_total(server, "SASL_PLAINTEXT", "successful-authentication-no-reauth") == 0


async def test_sasl_ssl_authenticates_over_tls(tmp_path: Path, certs: Certificates) -> None:
    async with secure_broker(tmp_path, certs) as (server, recorder):
        port = server.bound_port("SASL_SSL")
        async with await open_tls(port, certs.client_context()) as connection:
            result = await sasl_authenticate(connection, "SCRAM-SHA-512", "carol", "carol-pw")
            assert result.authenticate_error == ErrorCode.NONE
            response = await metadata(connection)
        assert [b.port for b in response.brokers] == [port]
        assert recorder.principals == ["User:carol"]


async def test_ssl_without_client_certificates_is_anonymous(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secure_broker(tmp_path, certs) as (server, recorder):
        async with await open_tls(server.bound_port("SSL"), certs.client_context()) as connection:
            assert (await metadata(connection)).brokers
        assert recorder.principals == ["User:ANONYMOUS"]


async def test_mtls_principal_is_the_certificate_subject(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secure_broker(tmp_path, certs) as (server, recorder):
        context = certs.client_context(with_certificate=True)
        async with await open_tls(server.bound_port("MTLS"), context) as connection:
            assert (await metadata(connection)).brokers
        assert recorder.principals == [f"User:{subject_of_client()}"]


async def test_mapping_rules_turn_the_subject_into_a_short_name(
    tmp_path: Path, certs: Certificates
) -> None:
    rules = {"listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U"}
    async with secure_broker(tmp_path, certs, **rules) as (server, recorder):
        context = certs.client_context(with_certificate=True)
        async with await open_tls(server.bound_port("MTLS"), context) as connection:
            await metadata(connection)
        assert recorder.principals == ["User:TEST-CLIENT"]


async def test_mtls_without_a_client_certificate_fails_the_handshake(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secure_broker(tmp_path, certs) as (server, _):
        with trio.fail_after(10):
            with pytest.raises((trio.BrokenResourceError, ConnectionClosed)):
                connection = await open_tls(server.bound_port("MTLS"), certs.client_context())
                # TLS 1.3: the server's refusal arrives after the client's handshake ends.
                await metadata(connection)
            await wait_until(lambda: auth_total(server, "MTLS", "failed-authentication") >= 1)


async def test_a_wrong_password_is_answered_after_the_delay_then_closed(
    tmp_path: Path, certs: Certificates
) -> None:
    delay = {"connection.failed.authentication.delay.ms": "300"}
    async with secure_broker(tmp_path, certs, **delay) as (server, recorder):
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            started = trio.current_time()
            result = await sasl_authenticate(connection, "SCRAM-SHA-256", "carol", "wrong")
            assert trio.current_time() - started >= 0.3
            assert result.authenticate_error == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert "SCRAM-SHA-256" in (result.error_message or "")
            await assert_closed(connection)
        assert auth_total(server, "SASL_PLAINTEXT", "failed-authentication") == 1
        assert recorder.principals == []


async def test_an_unknown_user_fails_like_a_wrong_password(
    tmp_path: Path, certs: Certificates
) -> None:
    async with (
        secure_broker(tmp_path, certs) as (server, _),
        await connect(server, "SASL_PLAINTEXT") as connection,
    ):
        result = await sasl_authenticate(connection, "PLAIN", "mallory", "alice-secret")
        assert result.authenticate_error == ErrorCode.SASL_AUTHENTICATION_FAILED
        await assert_closed(connection)


async def test_a_disabled_mechanism_gets_unsupported_sasl_mechanism_and_a_close(
    tmp_path: Path, certs: Certificates
) -> None:
    only_scram = {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    async with (
        secure_broker(tmp_path, certs, **only_scram) as (server, _),
        await connect(server, "SASL_PLAINTEXT") as connection,
    ):
        response = await connection.request(SaslHandshakeRequest("PLAIN"), 1)
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == ("SCRAM-SHA-512",)
        await assert_closed(connection)


async def test_requests_before_authentication_close_the_connection(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secure_broker(tmp_path, certs) as (server, recorder):
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            versions = await connection.request(
                ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
            )
            assert versions.error_code == ErrorCode.NONE
            assert {17, 36, 50, 51} <= {k.api_key for k in versions.api_keys}
            await connection.send(MetadataRequest(topics=()), 4)
            await assert_closed(connection)
        assert recorder.principals == []


async def test_a_frame_over_the_sasl_receive_limit_closes_before_authentication(
    tmp_path: Path, certs: Certificates
) -> None:
    limit = {"sasl.server.max.receive.size": "1000"}
    async with (
        secure_broker(tmp_path, certs, **limit) as (server, _),
        await connect(server, "SASL_PLAINTEXT") as connection,
    ):
        await connection.send_raw(struct.pack(">i", 1001) + b"\x00" * 1001)
        await assert_closed(connection)


async def test_the_v0_flow_takes_raw_scram_tokens(tmp_path: Path, certs: Certificates) -> None:
    async with secure_broker(tmp_path, certs) as (server, recorder):
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            handshake = await connection.request(SaslHandshakeRequest("SCRAM-SHA-256"), 0)
            assert handshake.error_code == ErrorCode.NONE
            client = scramp.ScramClient(["SCRAM-SHA-256"], "carol", "carol-pw")
            first = client.get_client_first().encode()
            await connection.send_raw(struct.pack(">i", len(first)) + first)
            client.set_server_first((await connection.receive_frame()).decode())
            final = client.get_client_final().encode()
            await connection.send_raw(struct.pack(">i", len(final)) + final)
            client.set_server_final((await connection.receive_frame()).decode())
            assert (await metadata(connection)).brokers
        assert recorder.principals == ["User:carol"]
        assert auth_total(server, "SASL_PLAINTEXT", "successful-authentication-no-reauth") == 1


async def test_the_v0_flow_closes_on_a_wrong_plain_token(
    tmp_path: Path, certs: Certificates
) -> None:
    async with (
        secure_broker(tmp_path, certs) as (server, _),
        await connect(server, "SASL_PLAINTEXT") as connection,
    ):
        await connection.request(SaslHandshakeRequest("PLAIN"), 0)
        token = b"\x00alice\x00bad"
        await connection.send_raw(struct.pack(">i", len(token)) + token)
        await assert_closed(connection)


async def test_an_expired_session_is_closed_on_its_next_request(
    tmp_path: Path, certs: Certificates, mock_clock: trio.testing.MockClock
) -> None:
    reauth = {"connections.max.reauth.ms": "200"}
    at_real_speed(mock_clock)
    async with secure_broker(tmp_path, certs, **reauth) as (server, recorder):
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            autojump(mock_clock)
            result = await sasl_authenticate(connection, "PLAIN", "alice", "alice-secret")
            assert result.session_lifetime_ms == 200
            await metadata(connection)
            await trio.sleep(0.3)
            await connection.send(MetadataRequest(topics=()), 4)
            await assert_closed(connection)
            at_real_speed(mock_clock)
        assert recorder.principals == ["User:alice"]
        assert auth_total(server, "SASL_PLAINTEXT", "expired-connections-killed-count") == 1


async def test_reauthentication_keeps_the_connection_alive(
    tmp_path: Path, certs: Certificates, mock_clock: trio.testing.MockClock
) -> None:
    reauth = {"connections.max.reauth.ms": "200"}
    at_real_speed(mock_clock)
    async with secure_broker(tmp_path, certs, **reauth) as (server, recorder):
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            autojump(mock_clock)
            await sasl_authenticate(connection, "SCRAM-SHA-256", "carol", "carol-pw")
            await trio.sleep(0.3)
            again = await sasl_authenticate(
                connection, "SCRAM-SHA-256", "carol", "carol-pw", api_versions_first=False
            )
            assert again.authenticate_error == ErrorCode.NONE
            assert (await metadata(connection)).brokers
            at_real_speed(mock_clock)
        assert recorder.principals == ["User:carol"]
        assert auth_total(server, "SASL_PLAINTEXT", "successful-reauthentication") == 1


async def test_sasl_requests_on_an_authenticated_or_plaintext_connection_are_illegal(
    tmp_path: Path, certs: Certificates
) -> None:
    async with (
        secure_broker(tmp_path, certs) as (server, _),
        await connect(server, "PLAINTEXT") as connection,
    ):
        handshake = await connection.request(SaslHandshakeRequest("PLAIN"), 1)
        assert handshake.error_code == ErrorCode.ILLEGAL_SASL_STATE
        auth = await connection.request(SaslAuthenticateRequest(b"x"), 2)
        assert auth.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert (await metadata(connection)).brokers


async def test_plain_bytes_to_a_tls_port_close_that_connection_only(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secure_broker(tmp_path, certs) as (server, _):
        port = server.bound_port("SSL")
        async with await trio.open_tcp_stream("127.0.0.1", port) as raw:
            await raw.send_all(KafkaRequestBytes.api_versions())
            received = b""
            with trio.fail_after(5):  # the broker closes: the loop ends at end of stream
                while chunk := await raw.receive_some(100):
                    received += chunk
            # At most a TLS alert record (content type 21), never a Kafka response.
            assert received == b"" or received[0] == 21
            async with await open_tls(port, certs.client_context()) as connection:
                assert (await metadata(connection)).brokers
        assert auth_total(server, "SSL", "failed-authentication") == 1


async def test_a_tls_hello_to_a_plaintext_port_closes_that_connection_only(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secure_broker(tmp_path, certs) as (server, _):
        port = server.bound_port("PLAINTEXT")
        with trio.fail_after(10):
            with pytest.raises((trio.BrokenResourceError, ssl.SSLError)):
                await open_tls(port, certs.client_context())
            async with await connect(server, "PLAINTEXT") as connection:
                assert (await metadata(connection)).brokers


async def test_stalled_handshakes_and_failing_logins_do_not_hold_up_other_connections(
    tmp_path: Path, certs: Certificates
) -> None:
    delay = {"connection.failed.authentication.delay.ms": "5000"}
    async with secure_broker(tmp_path, certs, **delay) as (server, _):
        stalled = [
            await trio.open_tcp_stream("127.0.0.1", server.bound_port("SSL")) for _ in range(5)
        ]
        failing = await connect(server, "SASL_PLAINTEXT")
        await failing.send(SaslHandshakeRequest("PLAIN"), 1)
        await failing.receive()
        await failing.send(SaslAuthenticateRequest(b"\x00alice\x00wrong"), 2)
        # Both the silent TLS clients and the delayed failure wait in their own tasks.
        with trio.fail_after(3):
            async with await open_tls(server.bound_port("SSL"), certs.client_context()) as tls:
                for _ in range(20):
                    assert (await metadata(tls)).brokers
            async with await connect(server, "SASL_PLAINTEXT") as other:
                result = await sasl_authenticate(other, "PLAIN", "alice", "alice-secret")
                assert result.authenticate_error == ErrorCode.NONE
        for stream in stalled:
            await stream.aclose()
        await failing.aclose()


class KafkaRequestBytes:
    @staticmethod
    def api_versions() -> bytes:
        body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        return struct.pack(">i", len(body)) + body


async def test_garbage_during_authentication_never_harms_the_broker(
    tmp_path: Path, certs: Certificates
) -> None:
    """Seeded random frames and raw bytes at every SASL stage: each connection is answered
    or closed, and a proper login still works afterwards."""
    rng = random.Random(1234)

    def garbage() -> bytes:
        body = rng.randbytes(rng.randrange(0, 300))
        if rng.random() < 0.5:
            return struct.pack(">i", len(body)) + body  # a well-framed nonsense frame
        return body  # no framing at all

    async def abuse(server: KafkaServer, stage: int) -> None:
        async with await connect(server, "SASL_PLAINTEXT") as connection:
            if stage >= 1:
                await connection.request(SaslHandshakeRequest("SCRAM-SHA-256"), stage % 2)
            if stage >= 2 and stage % 2:
                await connection.send(SaslAuthenticateRequest(rng.randbytes(40)), 2)
            for _ in range(3):
                await connection.send_raw(garbage())
            with trio.move_on_after(2):
                while True:
                    await connection.receive_frame()

    delay = {"connection.failed.authentication.delay.ms": "0"}
    async with secure_broker(tmp_path, certs, **delay) as (server, recorder):
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for index in range(40):
                    nursery.start_soon(abuse_quietly, abuse, server, index % 4)
            async with await connect(server, "SASL_PLAINTEXT") as connection:
                result = await sasl_authenticate(connection, "SCRAM-SHA-256", "carol", "carol-pw")
                assert result.authenticate_error == ErrorCode.NONE
                assert (await metadata(connection)).brokers
        assert recorder.principals == ["User:carol"]
        assert auth_total(server, "SASL_PLAINTEXT", "successful-authentication") == 1
        assert auth_total(server, "SASL_PLAINTEXT", "failed-authentication") > 0
        # Every connection, abusive or not, is closed and forgotten.
        processors = server.socket_server.processors["SASL_PLAINTEXT"]
        await wait_until(lambda: not any(p.connections for p in processors))


async def abuse_quietly(abuse: Any, server: KafkaServer, stage: int) -> None:
    """The broker closing the connection is the expected end of an abusive client."""
    with contextlib.suppress(ConnectionClosed, trio.BrokenResourceError, ValueError):
        await abuse(server, stage)


async def test_a_clients_close_notify_is_answered(tmp_path: Path, certs: Certificates) -> None:
    """asyncio clients (aiokafka) wait up to 30 s for the broker's close_notify."""
    async with secure_broker(tmp_path, certs) as (server, _):
        port = server.bound_port("SSL")

        def client() -> int:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                tls = certs.client_context().wrap_socket(raw, server_hostname="127.0.0.1")
                tls.sendall(KafkaRequestBytes.api_versions())
                response = b""
                while (
                    len(response) < 4 or len(response) < 4 + struct.unpack_from(">i", response)[0]
                ):
                    response += tls.recv(65536)
                tls.unwrap()  # sends ours, then waits (5 s at most) for the broker's
                return len(response)

        assert await trio.to_thread.run_sync(client) > 0


async def test_a_connection_closed_before_its_handshake_is_no_failed_login(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secure_broker(tmp_path, certs) as (server, _):
        port = server.bound_port("SSL")
        for _ in range(3):
            probe = await trio.open_tcp_stream("127.0.0.1", port)
            await probe.aclose()
        async with await open_tls(port, certs.client_context()) as connection:
            assert (await metadata(connection)).brokers
        processors = server.socket_server.processors["SSL"]
        await wait_until(lambda: not any(p.connections for p in processors))
        assert auth_total(server, "SSL", "failed-authentication") == 0
        assert auth_total(server, "SSL", "successful-authentication") == 1


async def test_garbage_to_tls_ports_closes_each_connection_and_nothing_else(
    tmp_path: Path, certs: Certificates
) -> None:
    """Seeded random bytes, some after a real TLS record header, to SSL and SASL_SSL."""
    rng = random.Random(99)

    async def garbage(port: int) -> None:
        with contextlib.suppress(trio.BrokenResourceError, OSError):
            async with await trio.open_tcp_stream("127.0.0.1", port) as raw:
                prefix = b"\x16\x03\x01" if rng.random() < 0.5 else b""
                await raw.send_all(prefix + rng.randbytes(rng.randrange(1, 2000)))
                # An incomplete record keeps the broker waiting (until connections.max.idle.ms),
                # as Kafka does: this client gives up first.
                with trio.move_on_after(1):
                    while await raw.receive_some(4096):
                        pass

    async with secure_broker(tmp_path, certs) as (server, recorder):
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for index in range(30):
                    listener = "SSL" if index % 2 else "SASL_SSL"
                    nursery.start_soon(garbage, server.bound_port(listener))
            async with await open_tls(server.bound_port("SSL"), certs.client_context()) as tls:
                assert (await metadata(tls)).brokers
            processors = [
                p for name in ("SSL", "SASL_SSL") for p in server.socket_server.processors[name]
            ]
            await wait_until(lambda: not any(p.connections for p in processors), 30)
        assert recorder.principals == ["User:ANONYMOUS"]


async def test_open_tls_connections_are_counted_per_cipher_and_protocol(
    tmp_path: Path, certs: Certificates
) -> None:
    async with (
        secure_broker(tmp_path, certs) as (server, _),
        await open_tls(server.bound_port("SSL"), certs.client_context()) as tls,
    ):
        await metadata(tls)
        cipher = tls.stream.cipher()  # type: ignore[attr-defined]
        samples = [
            s
            for s in server.metrics.snapshot()
            if s.type_ == "socket-server-metrics" and s.name == "connections"
        ]
        assert len(samples) == 1
        tags = dict(samples[0].tags)
        assert (tags["listener"], tags["protocol"]) == ("SSL", "TLSv1.3")
        assert tags["cipher"] == cipher[0]
        assert samples[0].values == {"value": 1.0}
