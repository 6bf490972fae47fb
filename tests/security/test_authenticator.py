"""The per-connection SASL state machine (sans-IO): what is allowed before
authentication, the v0 raw-token flow, failures, session expiry and re-authentication."""

from __future__ import annotations

from typing import Any

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from broker.net.authenticator import (
    API_VERSIONS,
    MAX_REASON_CHARS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    Action,
    Event,
    SaslAuthenticator,
    SaslSettings,
    State,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from broker.security.sasl_server import PlainSaslServer, SaslServer, ScramSaslServer
from broker.security.scram_credentials import MECHANISM_BY_NAME, ScramCredential

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
CREDENTIAL = ScramCredential.from_password(
    MECHANISM_BY_NAME["SCRAM-SHA-256"], "pw", b"0123456789abcdef", 4096
)


def settings(reauth_ms: int = 0) -> SaslSettings:
    def new_server(mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainSaslServer(USERS)
        return ScramSaslServer(
            mechanism, lambda u, m: CREDENTIAL if (u, m) == ("carol", "SCRAM-SHA-256") else None
        )

    mechanisms = ("PLAIN", "SCRAM-SHA-256")
    return SaslSettings(mechanisms, new_server, dict.fromkeys(mechanisms, reauth_ms))


def handshake(auth: SaslAuthenticator, mechanism: str, version: int = 1, now: int = 0) -> Any:
    return auth.on_request(SASL_HANDSHAKE, version, SaslHandshakeRequest(mechanism), now)


def authenticate(auth: SaslAuthenticator, token: bytes, version: int = 2, now: int = 0) -> Any:
    return auth.on_request(SASL_AUTHENTICATE, version, SaslAuthenticateRequest(token), now)


def plain_login(auth: SaslAuthenticator, user: str = "alice", now: int = 0) -> Any:
    handshake(auth, "PLAIN", now=now)
    return authenticate(auth, f"\x00{user}\x00{USERS[user]}".encode(), now=now)


def test_api_versions_is_forwarded_before_authentication() -> None:
    auth = SaslAuthenticator(settings())
    assert auth.on_request(API_VERSIONS, 3, None, 0).action is Action.FORWARD
    assert not auth.authenticated


@pytest.mark.parametrize("api_key", [0, 1, 3, 19, 50, 51])
def test_any_other_request_before_authentication_closes_the_connection(api_key: int) -> None:
    auth = SaslAuthenticator(settings())
    verdict = auth.on_request(api_key, 0, None, 0)
    assert verdict.action is Action.CLOSE
    assert verdict.event is Event.FAILED
    assert "during SASL authentication" in verdict.reason


def test_sasl_authenticate_without_a_handshake_is_an_illegal_state() -> None:
    verdict = authenticate(SaslAuthenticator(settings()), b"\x00alice\x00alice-secret")
    assert verdict.action is Action.FAIL
    assert verdict.body.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_a_handshake_names_the_enabled_mechanisms() -> None:
    verdict = handshake(SaslAuthenticator(settings()), "PLAIN")
    assert verdict.action is Action.REPLY
    assert verdict.body.error_code == ErrorCode.NONE
    assert verdict.body.mechanisms == ("PLAIN", "SCRAM-SHA-256")


def test_an_unsupported_mechanism_fails_with_the_enabled_ones() -> None:
    auth = SaslAuthenticator(settings())
    verdict = handshake(auth, "SCRAM-SHA-512")
    assert verdict.action is Action.FAIL
    assert verdict.body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert verdict.body.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert auth.state is State.FAILED


def test_plain_login_sets_the_principal_and_forwards_later_requests() -> None:
    auth = SaslAuthenticator(settings())
    verdict = plain_login(auth, "bob")
    assert verdict.action is Action.REPLY
    assert verdict.event is Event.AUTHENTICATED
    assert verdict.body.error_code == ErrorCode.NONE
    assert auth.principal == "User:bob"
    assert auth.on_request(3, 12, None, 10).action is Action.FORWARD


def test_a_wrong_password_fails_with_sasl_authentication_failed() -> None:
    auth = SaslAuthenticator(settings())
    handshake(auth, "PLAIN")
    verdict = authenticate(auth, b"\x00alice\x00nope")
    assert verdict.action is Action.FAIL
    assert verdict.event is Event.FAILED
    assert verdict.body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Invalid username or password" in verdict.body.error_message
    assert not auth.authenticated


def test_a_v0_handshake_switches_to_raw_tokens() -> None:
    auth = SaslAuthenticator(settings())
    handshake(auth, "SCRAM-SHA-256", version=0)
    assert auth.wants_raw_token
    client = scramp.ScramClient(["SCRAM-SHA-256"], "carol", "pw")
    first = auth.on_raw_token(client.get_client_first().encode(), 0)
    assert first.action is Action.REPLY and first.body is None
    assert first.raw is not None
    client.set_server_first(first.raw.decode())
    final = auth.on_raw_token(client.get_client_final().encode(), 0)
    assert final.raw is not None
    client.set_server_final(final.raw.decode())
    assert final.event is Event.AUTHENTICATED
    assert auth.principal == "User:carol"
    assert not auth.wants_raw_token


def test_a_failed_raw_token_closes_without_an_answer() -> None:
    auth = SaslAuthenticator(settings())
    handshake(auth, "PLAIN", version=0)
    verdict = auth.on_raw_token(b"\x00alice\x00wrong", 0)
    assert verdict.action is Action.FAIL
    assert verdict.body is None and verdict.raw is None


def test_plain_success_in_the_raw_flow_answers_an_empty_token() -> None:
    auth = SaslAuthenticator(settings())
    handshake(auth, "PLAIN", version=0)
    verdict = auth.on_raw_token(b"\x00alice\x00alice-secret", 0)
    assert verdict.action is Action.REPLY and verdict.raw == b""


def test_the_session_lifetime_is_announced_and_enforced() -> None:
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    verdict = plain_login(auth, now=5000)
    assert verdict.body.session_lifetime_ms == 1000
    assert auth.on_request(3, 12, None, 6000).action is Action.FORWARD
    expired = auth.on_request(3, 12, None, 6001)
    assert expired.action is Action.CLOSE
    assert expired.event is Event.EXPIRED


def test_no_session_lifetime_without_reauthentication() -> None:
    auth = SaslAuthenticator(settings(reauth_ms=0))
    assert plain_login(auth).body.session_lifetime_ms == 0
    assert auth.on_request(3, 12, None, 10**12).action is Action.FORWARD


def test_reauthentication_renews_the_session() -> None:
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    plain_login(auth, now=0)
    assert handshake(auth, "PLAIN", now=900).action is Action.REPLY
    verdict = authenticate(auth, b"\x00alice\x00alice-secret", now=900)
    assert verdict.event is Event.REAUTHENTICATED
    assert auth.on_request(3, 12, None, 1800).action is Action.FORWARD
    assert auth.on_request(3, 12, None, 1901).event is Event.EXPIRED


def test_reauthentication_may_start_after_expiry() -> None:
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    plain_login(auth, now=0)
    assert handshake(auth, "PLAIN", now=5000).action is Action.REPLY
    assert authenticate(auth, b"\x00alice\x00alice-secret", now=5000).action is Action.REPLY


def test_reauthentication_cannot_change_the_principal() -> None:
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    plain_login(auth, "alice")
    handshake(auth, "PLAIN")
    verdict = authenticate(auth, b"\x00bob\x00bob-secret")
    assert verdict.action is Action.FAIL
    assert verdict.event is Event.FAILED_REAUTHENTICATION
    assert "Cannot change principals" in verdict.body.error_message


def test_reauthentication_cannot_change_the_mechanism() -> None:
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    plain_login(auth)
    verdict = handshake(auth, "SCRAM-SHA-256")
    assert verdict.action is Action.FAIL
    assert verdict.body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_a_v0_authenticate_client_cannot_reauthenticate() -> None:
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    handshake(auth, "PLAIN")
    authenticate(auth, b"\x00alice\x00alice-secret", version=0)
    # Its SaslHandshake goes to the API layer (ILLEGAL_SASL_STATE there).
    assert handshake(auth, "PLAIN", now=10).action is Action.FORWARD


_REQUESTS = st.one_of(
    st.tuples(st.just(SASL_HANDSHAKE), st.sampled_from(["PLAIN", "SCRAM-SHA-256", "X", ""])),
    st.tuples(st.just(SASL_AUTHENTICATE), st.binary(max_size=80)),
    st.tuples(st.just(API_VERSIONS), st.none()),
    # Any other request (SASL's own come with their payloads above).
    st.tuples(
        st.integers(0, 70).filter(lambda key: key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE)),
        st.none(),
    ),
)


def failed(auth: SaslAuthenticator) -> bool:
    """Read afresh: each call to the authenticator may move its state."""
    return auth.state is State.FAILED


@given(st.lists(_REQUESTS, max_size=8), st.booleans())
def test_arbitrary_request_sequences_only_ever_forward_reply_fail_or_close(
    requests: list[tuple[int, Any]], raw: bool
) -> None:
    auth = SaslAuthenticator(settings(reauth_ms=100))
    for now, (api_key, payload) in enumerate(requests):
        if failed(auth):
            break
        if auth.wants_raw_token:
            verdict = auth.on_raw_token(payload if isinstance(payload, bytes) else b"", now)
        elif api_key == SASL_HANDSHAKE:
            verdict = handshake(auth, payload, version=0 if raw else 1, now=now)
        elif api_key == SASL_AUTHENTICATE:
            verdict = authenticate(auth, payload, now=now)
        else:
            verdict = auth.on_request(api_key, 0, None, now)
        assert verdict.action in Action
        if verdict.action is Action.FORWARD:
            assert api_key in (API_VERSIONS, SASL_HANDSHAKE) or auth.authenticated
        if verdict.action in (Action.FAIL, Action.CLOSE):
            assert failed(auth)
    assert not auth.authenticated or auth.principal.startswith("User:")


HOSTILE_TEXT = st.text(min_size=1, max_size=12_000) | st.sampled_from(
    ["M" * 10_000, "\n" * 5_000, "a\x1b[31m\r\nforged log line", "é\u202e" * 3_000]
)


@given(HOSTILE_TEXT)
def test_a_failure_reason_quoting_a_mechanism_name_is_short_and_printable(name: str) -> None:
    verdict = handshake(SaslAuthenticator(settings()), "X" + name)
    assert verdict.action is Action.FAIL
    assert len(verdict.reason) <= MAX_REASON_CHARS
    assert verdict.reason.isprintable()


@given(HOSTILE_TEXT)
def test_a_failure_reason_from_a_scram_exchange_is_short_and_printable(user: str) -> None:
    auth = SaslAuthenticator(settings())
    handshake(auth, "SCRAM-SHA-256")
    first = authenticate(auth, f"n,,n={user},r=nonce{user}".encode())
    verdict = first
    if first.action is Action.REPLY:  # a made-up salt for an unknown user: fails at the proof
        verdict = authenticate(auth, f"c=biws,r=x{user},p=AAAA".encode())
    assert verdict.action is Action.FAIL
    assert len(verdict.reason) <= MAX_REASON_CHARS
    assert verdict.reason.isprintable()
    assert len(verdict.body.error_message) <= MAX_REASON_CHARS
