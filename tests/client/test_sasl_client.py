"""The client SASL exchanges, sans-IO, against scramp's server side in-process."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.cmd_users import parse_add_config
from broker.client.sasl_client import (
    PlainClient,
    SaslAuthenticationError,
    SaslAuthenticator,
    ScramClient,
    reauthentication_due,
    scram_credential,
)
from broker.client.security_config import SaslCredentials
from broker.client.session import ClientError
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse

MIN_ITERATIONS = 4096


def server_keys(mechanism: str, salted_password: bytes) -> tuple[bytes, bytes]:
    """StoredKey and ServerKey as a broker derives them from the stored salted password."""
    digest = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return digest(client_key).digest(), server_key


def scram_server(
    mechanism: str, users: dict[str, tuple[bytes, bytes, int]]
) -> scramp.core.ScramServer:
    """A scramp server whose credentials are (salt, salted password, iterations) per user."""

    def auth_info(username: str) -> tuple[bytes, bytes, bytes, int]:
        salt, salted, iterations = users[username]
        stored_key, server_key = server_keys(mechanism, salted)
        return salt, stored_key, server_key, iterations

    return scramp.ScramMechanism(mechanism).make_server(auth_info)


def run_exchange(client: ScramClient, server: scramp.core.ScramServer) -> None:
    server.set_client_first(client.initial_response().decode())
    final = client.evaluate_challenge(server.get_server_first().encode())
    assert final is not None
    server.set_client_final(final.decode())
    assert client.evaluate_challenge(server.get_server_final().encode()) is None


_names = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=16
)


@settings(max_examples=15)
@given(
    mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    username=_names,
    password=_names,
    salt=st.binary(min_size=16, max_size=32),
)
def test_a_credential_set_by_the_client_admits_the_scram_login(
    mechanism: str, username: str, password: str, salt: bytes
) -> None:
    credential = scram_credential(mechanism, password, MIN_ITERATIONS, salt)
    server = scram_server(mechanism, {username: (salt, credential.salted_password, MIN_ITERATIONS)})
    client = ScramClient(mechanism, username, password)
    run_exchange(client, server)
    assert client.complete


def test_the_salted_password_is_kafkas_hi() -> None:
    """RFC 5802's Hi is PBKDF2; scramp's own derivation agrees for an ASCII password."""
    salt = b"0123456789abcdef"
    credential = scram_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    _, stored_key, server_key, _ = scramp.ScramMechanism("SCRAM-SHA-256").make_auth_info(
        "pencil", iteration_count=4096, salt=salt
    )
    assert server_keys("SCRAM-SHA-256", credential.salted_password) == (stored_key, server_key)


def test_a_wrong_password_is_refused_by_the_server() -> None:
    salt = b"s" * 16
    credential = scram_credential("SCRAM-SHA-256", "right", MIN_ITERATIONS, salt)
    server = scram_server(
        "SCRAM-SHA-256", {"alice": (salt, credential.salted_password, MIN_ITERATIONS)}
    )
    client = ScramClient("SCRAM-SHA-256", "alice", "wrong")
    server.set_client_first(client.initial_response().decode())
    final = client.evaluate_challenge(server.get_server_first().encode())
    assert final is not None
    with pytest.raises(scramp.ScramException):
        server.set_client_final(final.decode())


def test_a_forged_server_signature_fails_the_client() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    first = client.initial_response().decode()
    nonce = first.split("r=")[1]
    salt = base64.b64encode(b"salt" * 4).decode()
    client.evaluate_challenge(f"r={nonce}server,s={salt},i=4096".encode())
    forged = base64.b64encode(b"x" * 32).decode()
    with pytest.raises(SaslAuthenticationError, match="SCRAM-SHA-256"):
        client.evaluate_challenge(f"v={forged}".encode())
    assert not client.complete


def test_plain_sends_authzid_user_and_password() -> None:
    client = PlainClient("alice", "secret")
    assert client.initial_response() == b"\0alice\0secret"
    assert client.evaluate_challenge(b"") is None and client.complete


def _authenticator(mechanism: str = "PLAIN") -> SaslAuthenticator:
    return SaslAuthenticator(SaslCredentials(mechanism, "alice", "secret"), 1)


def test_authenticator_sends_handshake_then_the_mechanism_messages() -> None:
    auth = _authenticator()
    assert auth.handshake_request().mechanism == "PLAIN"
    auth.on_handshake_response(SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",)))
    request = auth.next_request()
    assert request is not None and request.auth_bytes == b"\0alice\0secret"
    assert auth.next_request() is None
    auth.on_authenticate_response(
        SaslAuthenticateResponse(error_code=0, auth_bytes=b"", session_lifetime_ms=60_000)
    )
    assert auth.complete and auth.session_lifetime_ms == 60_000
    assert auth.next_request() is None


def test_an_unsupported_mechanism_names_what_the_broker_offers() -> None:
    auth = _authenticator("SCRAM-SHA-512")
    with pytest.raises(SaslAuthenticationError, match=r"SCRAM-SHA-512 \(it offers PLAIN, SCRAM"):
        auth.on_handshake_response(
            SaslHandshakeResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                mechanisms=("PLAIN", "SCRAM-SHA-256"),
            )
        )


def test_a_failed_authentication_carries_the_brokers_message() -> None:
    auth = _authenticator()
    auth.on_handshake_response(SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",)))
    auth.next_request()
    with pytest.raises(SaslAuthenticationError, match="failed: Invalid username or password"):
        auth.on_authenticate_response(
            SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message="Invalid username or password",
            )
        )


def test_kafka_configs_add_config_syntax() -> None:
    assert parse_add_config(
        "SCRAM-SHA-256=[iterations=8192,password=a=b],SCRAM-SHA-512=[password=c]"
    ) == [
        ("SCRAM-SHA-256", 8192, "a=b"),
        ("SCRAM-SHA-512", 4096, "c"),
    ]
    for bad in ("SCRAM-SHA-1=[password=x]", "SCRAM-SHA-256=[iterations=8192]", "password=x"):
        with pytest.raises(ClientError):
            parse_add_config(bad)


def test_a_name_saslprep_refuses_is_an_authentication_error_not_a_crash() -> None:
    with pytest.raises(SaslAuthenticationError, match=r"SCRAM-SHA-256: .*control characters"):
        SaslAuthenticator(SaslCredentials("SCRAM-SHA-256", "a\x07b", "pw"), 2)


@given(lifetime_ms=st.integers(min_value=1, max_value=10**9), seed=st.integers(0, 2**32))
def test_reauthentication_falls_between_85_and_95_percent_of_the_lifetime(
    lifetime_ms: int, seed: int
) -> None:
    due = reauthentication_due(100.0, lifetime_ms, random.Random(seed))
    assert due is not None
    assert 100.0 + 0.85 * lifetime_ms / 1000 <= due <= 100.0 + 0.95 * lifetime_ms / 1000


def test_a_session_without_lifetime_is_never_renewed() -> None:
    assert reauthentication_due(5.0, 0) is None
