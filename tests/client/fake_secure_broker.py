"""A stand-in broker for unit tests of the clients' TLS and SASL drivers.

It speaks just enough Kafka (ApiVersions, SaslHandshake, SaslAuthenticate,
Metadata) over a real TLS socket on 127.0.0.1, with scramp's SCRAM server and
PLAIN, so the Trio and the blocking client paths can be tested before (and
independently of) the real broker's security layer. Integration tests use the
real broker instead.
"""

from __future__ import annotations

import hashlib
import hmac
import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import scramp
import trio
import trustme

from broker.protocol.api import decode_request, decode_request_header, encode_response
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ApiVersionsResponse,
    MetadataResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from broker.protocol.messages.api_versions_response import ApiVersion
from broker.protocol.messages.metadata_response import MetadataResponseBroker

CLUSTER_ID = "fake-secure-cluster"
_ADVERTISED = ((18, 0, 3), (3, 0, 12), (17, 0, 1), (36, 0, 2))
_DIGESTS = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


@attrs.define
class Certificates:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""

    directory: Path
    ca: trustme.CA
    server: trustme.LeafCert
    client: trustme.LeafCert

    @property
    def ca_file(self) -> str:
        return str(self.directory / "ca.pem")

    @property
    def client_cert_file(self) -> str:
        return str(self.directory / "client.pem")

    @property
    def client_key_file(self) -> str:
        return str(self.directory / "client.key")

    @classmethod
    def make(cls, directory: Path, *server_names: str) -> Certificates:
        ca = trustme.CA()
        server = ca.issue_cert(*(server_names or ("127.0.0.1", "localhost")))
        client = ca.issue_cert("client.example", common_name="client-one")
        ca.cert_pem.write_to_path(str(directory / "ca.pem"))
        client.cert_chain_pems[0].write_to_path(str(directory / "client.pem"))
        client.private_key_pem.write_to_path(str(directory / "client.key"))
        return cls(directory, ca, server, client)


@attrs.define
class FakeSecureBroker:
    port: int
    plain_users: dict[str, str]
    scram_users: dict[tuple[str, str], tuple[bytes, bytes, int]]
    authenticated: list[str] = attrs.field(factory=list)
    client_certificates: list[dict[str, Any]] = attrs.field(factory=list)

    def scram_auth_info(self, mechanism: str, user: str) -> tuple[bytes, bytes, bytes, int]:
        salt, salted, iterations = self.scram_users[(mechanism, user)]
        digest = _DIGESTS[mechanism]
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        return salt, digest(client_key).digest(), server_key, iterations


@asynccontextmanager
async def fake_secure_broker(
    certificates: Certificates,
    *,
    sasl: bool = True,
    require_client_certificate: bool = False,
    plain_users: dict[str, str] | None = None,
    scram_users: dict[tuple[str, str], tuple[bytes, bytes, int]] | None = None,
) -> AsyncIterator[FakeSecureBroker]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificates.server.configure_cert(context)
    if require_client_certificate:
        context.verify_mode = ssl.CERT_REQUIRED
        certificates.ca.configure_trust(context)
    listeners = await trio.open_ssl_over_tcp_listeners(0, context, host="127.0.0.1")
    transport = listeners[0].transport_listener
    assert isinstance(transport, trio.SocketListener)
    port = transport.socket.getsockname()[1]
    broker = FakeSecureBroker(port, plain_users or {}, scram_users or {})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            trio.serve_listeners, lambda stream: _serve(broker, stream, sasl), listeners
        )
        yield broker
        nursery.cancel_scope.cancel()


async def _read_frame(stream: trio.SSLStream[trio.SocketStream], buffer: bytearray) -> bytes | None:
    while True:
        if len(buffer) >= 4:
            (size,) = struct.unpack_from(">i", buffer)
            if len(buffer) >= 4 + size:
                frame = bytes(buffer[4 : 4 + size])
                del buffer[: 4 + size]
                return frame
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data


async def _serve(
    broker: FakeSecureBroker, stream: trio.SSLStream[trio.SocketStream], sasl: bool
) -> None:
    buffer = bytearray()
    authenticated = not sasl
    mechanism = ""
    scram_server: Any = None
    try:
        await stream.do_handshake()
        peer = stream.getpeercert()
        if peer:
            broker.client_certificates.append(peer)
        while (frame := await _read_frame(stream, buffer)) is not None:
            header, offset = decode_request_header(frame)
            request = decode_request(header, frame, offset)
            close = False
            if header.api_key == 18:
                body: Any = ApiVersionsResponse(
                    api_keys=tuple(ApiVersion(k, lo, hi) for k, lo, hi in _ADVERTISED)
                )
            elif header.api_key == 17:
                mechanism = request.mechanism
                offered = ("PLAIN", *sorted({m for m, _ in broker.scram_users}))
                if not sasl:
                    body = SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)
                elif mechanism in offered:
                    body = SaslHandshakeResponse(mechanisms=offered)
                else:
                    body = SaslHandshakeResponse(
                        error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=offered
                    )
            elif header.api_key == 36:
                body, done, scram_server = _authenticate(
                    broker, mechanism, bytes(request.auth_bytes), scram_server
                )
                authenticated = authenticated or done
                close = body.error_code != ErrorCode.NONE
            elif header.api_key == 3 and authenticated:
                body = MetadataResponse(
                    brokers=(MetadataResponseBroker(1, "127.0.0.1", broker.port),),
                    cluster_id=CLUSTER_ID,
                    controller_id=1,
                )
            else:
                return  # Kafka closes a connection that skips authentication
            chunks = encode_response(
                header.api_key, header.api_version, header.correlation_id, body
            )
            await stream.send_all(b"".join(bytes(c) for c in chunks))
            if close:
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return
    finally:
        await trio.aclose_forcefully(stream)


def _authenticate(
    broker: FakeSecureBroker, mechanism: str, data: bytes, server: Any
) -> tuple[SaslAuthenticateResponse, bool, Any]:
    failed = SaslAuthenticateResponse(
        error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
        error_message=f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}",
    )
    if mechanism == "PLAIN":
        _, user, password = data.decode().split("\0")
        if broker.plain_users.get(user) != password:
            return failed, False, None
        broker.authenticated.append(user)
        return SaslAuthenticateResponse(session_lifetime_ms=0), True, None
    try:
        if server is None:
            users: list[str] = []

            def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
                users.append(user)
                return broker.scram_auth_info(mechanism, user)  # KeyError: unknown user

            scram = scramp.ScramMechanism(mechanism).make_server(auth_info)
            scram.set_client_first(data.decode())
            first = scram.get_server_first().encode()
            return SaslAuthenticateResponse(auth_bytes=first), False, (scram, users)
        scram, users = server
        scram.set_client_final(data.decode())
        broker.authenticated.extend(users)
        return SaslAuthenticateResponse(auth_bytes=scram.get_server_final().encode()), True, None
    except (scramp.ScramException, KeyError):
        return failed, False, None
