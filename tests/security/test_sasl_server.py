"""The SASL mechanisms' server sides, sans-IO: real client exchanges (scramp's client)
succeed, wrong secrets and arbitrary bytes only ever fail cleanly."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from broker.security.sasl_server import (
    MAX_SCRAM_MESSAGE,
    PlainSaslServer,
    SaslAuthenticationFailed,
    ScramSaslServer,
)
from broker.security.scram_credentials import MECHANISM_BY_NAME, ScramCredential

USERS = {"alice": "alice-secret", "bob": "b"}


def scram_lookup(password: str = "pw", iterations: int = 4096):  # type: ignore[no-untyped-def]
    credentials = {
        (user, name): ScramCredential.from_password(info, password, os.urandom(16), iterations)
        for user in ("carol", "dave")
        for name, info in MECHANISM_BY_NAME.items()
    }
    return lambda user, mechanism: credentials.get((user, mechanism))


LOOKUP = scram_lookup()


def test_plain_accepts_a_listed_user_with_its_password() -> None:
    server = PlainSaslServer(USERS)
    assert server.evaluate(b"\x00alice\x00alice-secret") == b""
    assert server.complete
    assert server.username == "alice"


def test_plain_accepts_an_authorization_id_equal_to_the_user() -> None:
    server = PlainSaslServer(USERS)
    server.evaluate(b"bob\x00bob\x00b")
    assert server.username == "bob"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\x00alice\x00wrong", "Invalid username or password"),
        (b"\x00mallory\x00alice-secret", "Invalid username or password"),
        (b"\x00alice", "expected 3 tokens"),
        (b"\x00\x00alice-secret", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"bob\x00alice\x00alice-secret", "authorization id that is different"),
        (b"\xff\x00alice\x00alice-secret", "not UTF-8"),
    ],
)
def test_plain_refuses_wrong_or_malformed_credentials(token: bytes, message: str) -> None:
    server = PlainSaslServer(USERS)
    with pytest.raises(SaslAuthenticationFailed, match=message):
        server.evaluate(token)
    assert not server.complete


@given(st.binary(max_size=200))
def test_plain_never_accepts_arbitrary_bytes(token: bytes) -> None:
    server = PlainSaslServer(USERS)
    try:
        server.evaluate(token)
    except SaslAuthenticationFailed:
        assert not server.complete
    else:
        # Only a token naming a listed user with its own password can succeed.
        _, user, password = token.decode().split("\x00")
        assert USERS[user] == password


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_completes_a_real_client_exchange_and_proves_the_server(mechanism: str) -> None:
    server = ScramSaslServer(mechanism, LOOKUP)
    client = scramp.ScramClient([mechanism], "carol", "pw")
    server_first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.evaluate(client.get_client_final().encode())
    assert server.complete
    assert server.username == "carol"
    client.set_server_final(server_final.decode())  # raises unless the server knew the key


@pytest.mark.parametrize(("user", "password"), [("carol", "wrong"), ("nobody", "pw")])
def test_scram_refuses_a_wrong_password_or_unknown_user(user: str, password: str) -> None:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
        client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
        server.evaluate(client.get_client_final().encode())
    assert not server.complete


def test_scram_refuses_a_credential_of_the_other_mechanism_at_the_proof() -> None:
    only_256 = {("carol", "SCRAM-SHA-256"): LOOKUP("carol", "SCRAM-SHA-256")}
    server = ScramSaslServer("SCRAM-SHA-512", lambda u, m: only_256.get((u, m)))
    client = scramp.ScramClient(["SCRAM-SHA-512"], "carol", "pw")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
        server.evaluate(client.get_client_final().encode())


def server_first_of(user: str) -> str:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    reply = server.evaluate(f"n,,n={user},r=clientnonce".encode()).decode()
    return reply.split(",")[1]  # s=<salt>, after r=<nonce>


def test_an_unknown_user_gets_the_same_made_up_salt_every_time_and_not_another_users() -> None:
    assert server_first_of("nobody") == server_first_of("nobody")
    assert server_first_of("nobody") != server_first_of("somebody")
    assert server_first_of("nobody").startswith("s=")


def test_an_unknown_user_and_a_wrong_password_fail_with_the_same_message() -> None:
    messages = []
    for user, password in (("carol", "wrong"), ("nobody", "wrong")):
        server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
        client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
        client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
        with pytest.raises(SaslAuthenticationFailed) as failure:
            server.evaluate(client.get_client_final().encode())
        messages.append(str(failure.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("user", ["carol", "nobody"])
def test_the_server_side_of_a_login_runs_no_pbkdf2(
    user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, "wrong")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    final = client.get_client_final().encode()  # the client's PBKDF2, before the patch

    def no_pbkdf2(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("PBKDF2 on the server")

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", no_pbkdf2)
    with pytest.raises(SaslAuthenticationFailed):
        server.evaluate(final)


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_scram_turns_arbitrary_bytes_into_a_clean_failure(first: bytes, final: bytes) -> None:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    try:
        server.evaluate(first)
        server.evaluate(final)
    except SaslAuthenticationFailed:
        pass
    assert not server.complete


@given(st.text(max_size=80), st.text(max_size=120))
def test_scram_turns_arbitrary_text_after_a_valid_first_message_into_a_failure(
    nonce_suffix: str, final: str
) -> None:
    server = ScramSaslServer("SCRAM-SHA-512", LOOKUP)
    server.evaluate(b"n,,n=dave,r=abcdefgh" + nonce_suffix.encode()[:0])
    with contextlib.suppress(SaslAuthenticationFailed):
        server.evaluate(final.encode())
    assert not server.complete


def _client_final(client_first_bare: str, server_first: str, nonce: str, password: str) -> bytes:
    """RFC 5802's client proof over a client-final carrying `nonce`, by hand."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_scram_accepts_old_librdkafkas_repeated_client_nonce_as_kafka_does() -> None:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    bare = "n=carol,r=clientnonce"
    server_first = server.evaluate(f"n,,{bare}".encode()).decode()
    combined = server_first.split(",")[0][2:]
    server.evaluate(_client_final(bare, server_first, "clientnonce" + combined, "pw"))
    assert server.complete


def test_scram_refuses_a_client_final_nonce_without_the_servers_part() -> None:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    bare = "n=carol,r=clientnonce"
    server_first = server.evaluate(f"n,,{bare}".encode()).decode()
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        server.evaluate(_client_final(bare, server_first, "clientnonce" + "forged", "pw"))


def test_scram_refuses_a_message_over_the_cap_unread() -> None:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    user = "u" * MAX_SCRAM_MESSAGE
    with pytest.raises(SaslAuthenticationFailed, match=f"over {MAX_SCRAM_MESSAGE} bytes"):
        server.evaluate(f"n,,n={user},r=nonce".encode())
    assert not server.complete


def test_scram_unescapes_the_user_name_as_rfc_5802_says() -> None:
    asked: list[str] = []

    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        asked.append(user)
        return None

    ScramSaslServer("SCRAM-SHA-256", lookup).evaluate(b"n,,n=a=2Cb=3Dc,r=nonce")
    assert asked == ["a,b=c"]
    with pytest.raises(SaslAuthenticationFailed, match="user name"):
        ScramSaslServer("SCRAM-SHA-256", lookup).evaluate(b"n,,n=a=2Xb,r=nonce")


@pytest.mark.parametrize(
    ("client_first", "client_final", "message"),
    [
        ("n,a=dave,n=carol,r=abc", None, "authorization id"),
        ("p=tls-unique,,n=carol,r=abc", None, "invalid client-first"),
        ("n,,n=carol,r=abc", "c=eSws,r={nonce},p=AAAA", "channel binding"),
        ("n,,n=carol,r=abc", "c=biws,r={nonce},p=not*base64", "invalid client-final"),
        ("n,,n=carol,r=abc", "c=biws,r={nonce},p=AAAA", "invalid-proof"),
    ],
)
def test_scram_refuses_malformed_or_mismatched_messages(
    client_first: str, client_final: str | None, message: str
) -> None:
    server = ScramSaslServer("SCRAM-SHA-256", LOOKUP)
    with pytest.raises(SaslAuthenticationFailed, match=message):
        server_first = server.evaluate(client_first.encode()).decode()
        assert client_final is not None
        nonce = server_first.split(",")[0][2:]
        server.evaluate(client_final.format(nonce=nonce).encode())
    assert not server.complete
    assert server.username == ""
