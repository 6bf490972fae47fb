"""What the security tests share: certificates made at test time, SCRAM users created
over the wire, and SASL exchanges run on our own client connection."""

from __future__ import annotations

import hashlib
import os
import ssl
from pathlib import Path

import attrs
import scramp
import trio
import trustme

from broker.client.connection import KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from broker.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialUpsertion,
)
from broker.security.scram_credentials import MECHANISM_BY_NAME

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)
CLIENT_CN = "test-client"


@attrs.frozen
class Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""

    ca: Path
    server: Path  # key and chain in one PEM file (ssl.keystore.location)
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA nobody trusts

    def client_context(self, with_certificate: bool = False) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_certificate:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert(
        "client@example.com",
        common_name=CLIENT_CN,
        organization_name="Test Org",
        organization_unit_name="Engineering",
    )
    paths = Certificates(
        ca=directory / "ca.pem",
        server=directory / "server.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        other_ca=directory / "other-ca.pem",
    )
    ca.cert_pem.write_to_path(str(paths.ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths.server))
    client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
    client.private_key_pem.write_to_path(str(paths.client_key))
    trustme.CA().cert_pem.write_to_path(str(paths.other_ca))
    return paths


def ssl_listener_settings(
    listener: str, certs: Certificates, client_auth: str = "none"
) -> dict[str, str]:
    prefix = f"listener.name.{listener.lower()}."
    settings = {
        prefix + "ssl.keystore.location": str(certs.server),
        prefix + "ssl.client.auth": client_auth,
    }
    if client_auth != "none":
        settings[prefix + "ssl.truststore.location"] = str(certs.ca)
    return settings


def subject_of_client() -> str:
    """The DN Kafka's DEFAULT principal mapping gives our client certificate."""
    return f"CN={CLIENT_CN},OU=Engineering,O=Test Org"


async def create_scram_user(
    connection: KafkaConnection,
    user: str,
    password: str,
    mechanism: str = "SCRAM-SHA-256",
    iterations: int = 4096,
) -> None:
    """AlterUserScramCredentials as an admin client sends it: salted on the client."""
    info = MECHANISM_BY_NAME[mechanism]
    salt = os.urandom(24)
    salted = hashlib.pbkdf2_hmac(info.hash_name, password.encode(), salt, iterations)
    response = await connection.request(
        AlterUserScramCredentialsRequest(
            upsertions=(
                ScramCredentialUpsertion(
                    name=user,
                    mechanism=info.type_id,
                    iterations=iterations,
                    salt=salt,
                    salted_password=salted,
                ),
            )
        ),
        0,
    )
    assert [(r.user, r.error_code) for r in response.results] == [(user, ErrorCode.NONE)], response


@attrs.frozen
class SaslResult:
    handshake_error: int
    authenticate_error: int
    session_lifetime_ms: int
    error_message: str | None


async def sasl_authenticate(
    connection: KafkaConnection,
    mechanism: str,
    user: str,
    password: str,
    *,
    api_versions_first: bool = True,
) -> SaslResult:
    """ApiVersions, SaslHandshake v1 and SaslAuthenticate v2 rounds, as librdkafka does."""
    if api_versions_first:
        versions = await connection.request(ApiVersionsRequest(), 0)
        assert versions.error_code == ErrorCode.NONE
    handshake = await connection.request(SaslHandshakeRequest(mechanism=mechanism), 1)
    if handshake.error_code != ErrorCode.NONE:
        return SaslResult(handshake.error_code, -1, 0, None)
    if mechanism == "PLAIN":
        tokens = [f"\x00{user}\x00{password}".encode()]
        response = await connection.request(SaslAuthenticateRequest(auth_bytes=tokens[0]), 2)
        return SaslResult(
            0, response.error_code, response.session_lifetime_ms, response.error_message
        )
    client = scramp.ScramClient([mechanism], user, password)
    first = await connection.request(
        SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()), 2
    )
    if first.error_code != ErrorCode.NONE:
        return SaslResult(0, first.error_code, 0, first.error_message)
    client.set_server_first(first.auth_bytes.decode())
    final = await connection.request(
        SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()), 2
    )
    if final.error_code == ErrorCode.NONE:
        client.set_server_final(final.auth_bytes.decode())  # verifies the server's signature
    return SaslResult(0, final.error_code, final.session_lifetime_ms, final.error_message)


async def open_tls(port: int, context: ssl.SSLContext) -> KafkaConnection:
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(tcp, context, server_hostname="127.0.0.1")
    await stream.do_handshake()
    return KafkaConnection(stream, "tls-test")
