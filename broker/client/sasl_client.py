"""The client side of Kafka's SASL exchange, sans-IO.

After ApiVersions a client sends SaslHandshake v1 naming its mechanism, then
SaslAuthenticate requests carrying the mechanism's messages until the exchange
completes (KIP-152). `SaslAuthenticator` produces those request bodies and
consumes the responses; the Trio client (`broker.client.session`) and the
blocking pipeline client (`broker.pipeline.kafka_client`) drive it over their
own sockets. SCRAM's message algebra comes from `scramp`, PLAIN is one message.
"""

from __future__ import annotations

import hashlib
import random
from typing import Protocol

import attrs
import scramp

from broker.client.security_config import PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, SaslCredentials
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

SASL_HANDSHAKE_VERSION = 1  # v0 would frame the tokens without SaslAuthenticate
SCRAM_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}


class SaslAuthenticationError(Exception):
    """The broker refused the mechanism or the credentials, or the exchange broke (one line)."""


class MechanismClient(Protocol):
    """One mechanism's client messages: the first, then one reply per server challenge."""

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The next message to send, or None when the exchange is complete."""
        ...


class PlainClient:
    """RFC 4616: ``authzid NUL authcid NUL passwd``; the broker's answer ends it."""

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()
        self._sent = False
        self.complete = False

    def initial_response(self) -> bytes:
        self._sent = True
        return self._message

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise SaslAuthenticationError("PLAIN: challenge before the initial response")
        self.complete = True
        return None


class ScramClient:
    """RFC 5802 without channel binding, as Kafka's ScramSaslClient speaks it."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in SCRAM_HASHES:
            raise SaslAuthenticationError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        try:  # SASLprep refuses some characters in names and passwords
            self._scram = scramp.ScramClient([mechanism], username, password)
        except scramp.ScramException as exc:
            raise SaslAuthenticationError(f"{mechanism}: {exc}") from None
        self._step = 0
        self.complete = False

    def initial_response(self) -> bytes:
        self._step = 1
        return str(self._scram.get_client_first()).encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        try:
            text = challenge.decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationError(
                f"{self.mechanism}: the server's message is not UTF-8"
            ) from None
        try:
            if self._step == 1:
                self._scram.set_server_first(text)
                self._step = 2
                return str(self._scram.get_client_final()).encode()
            if self._step == 2:
                self._scram.set_server_final(text)
                self._step = 3
                self.complete = True
                return None
        except scramp.ScramException as exc:
            raise SaslAuthenticationError(f"{self.mechanism}: {exc}") from None
        raise SaslAuthenticationError(f"{self.mechanism}: unexpected server message")


def mechanism_client(credentials: SaslCredentials) -> MechanismClient:
    if credentials.mechanism == PLAIN:
        return PlainClient(credentials.username, credentials.password)
    return ScramClient(credentials.mechanism, credentials.username, credentials.password)


@attrs.frozen
class ScramCredential:
    """What the broker stores for a SCRAM user (AlterUserScramCredentials' upsertion)."""

    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes = attrs.field(repr=False)


def scram_credential(
    mechanism: str, password: str, iterations: int, salt: bytes
) -> ScramCredential:
    """SaltedPassword := Hi(password, salt, i), Hi being PBKDF2 with the mechanism's HMAC.

    Computed here so that the password itself never travels to the broker (KIP-554).
    """
    digest = SCRAM_HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    return ScramCredential(mechanism, iterations, salt, salted)


class SaslAuthenticator:
    """Requests and response checks of one SASL login on one connection.

    Use: send `handshake_request()` (SaslHandshake v1), pass its answer to
    `on_handshake_response`; then while `next_request()` gives a body, send it as
    SaslAuthenticate at `authenticate_version` and pass the answer to
    `on_authenticate_response`.
    """

    def __init__(self, credentials: SaslCredentials, authenticate_version: int) -> None:
        self.credentials = credentials
        self.authenticate_version = authenticate_version
        self._client = mechanism_client(credentials)
        self._pending: bytes | None = None
        self._handshaken = False
        self.session_lifetime_ms = 0

    @property
    def complete(self) -> bool:
        return self._client.complete

    def handshake_request(self) -> SaslHandshakeRequest:
        return SaslHandshakeRequest(mechanism=self.credentials.mechanism)

    def on_handshake_response(self, response: SaslHandshakeResponse) -> None:
        mechanism = self.credentials.mechanism
        if response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            offered = ", ".join(response.mechanisms) or "none"
            raise SaslAuthenticationError(
                f"the broker does not enable SASL mechanism {mechanism} (it offers {offered})"
            )
        if response.error_code == ErrorCode.ILLEGAL_SASL_STATE:
            raise SaslAuthenticationError(
                "the broker refused the SASL handshake (ILLEGAL_SASL_STATE): is this listener"
                " SASL_PLAINTEXT or SASL_SSL?"
            )
        if response.error_code != ErrorCode.NONE:
            raise SaslAuthenticationError(
                f"SaslHandshake failed: {_error_name(response.error_code)}"
            )
        self._handshaken = True
        self._pending = self._client.initial_response()

    def next_request(self) -> SaslAuthenticateRequest | None:
        if not self._handshaken:
            raise SaslAuthenticationError("SaslAuthenticate before the handshake")
        if self._pending is None:
            return None
        body, self._pending = self._pending, None
        return SaslAuthenticateRequest(auth_bytes=body)

    def on_authenticate_response(self, response: SaslAuthenticateResponse) -> None:
        if response.error_code != ErrorCode.NONE:
            detail = response.error_message or _error_name(response.error_code)
            raise SaslAuthenticationError(
                f"authentication as {self.credentials.username!r} with"
                f" {self.credentials.mechanism} failed: {detail}"
            )
        self.session_lifetime_ms = int(response.session_lifetime_ms)
        self._pending = self._client.evaluate_challenge(bytes(response.auth_bytes))
        if self._pending is None and not self._client.complete:
            raise SaslAuthenticationError(f"{self.credentials.mechanism}: exchange ended early")


def reauthentication_due(
    now: float, session_lifetime_ms: int, rng: random.Random | None = None
) -> float | None:
    """When to log in again on the same connection (KIP-368), as Kafka's clients do: at a
    random point between 85% and 95% of the session lifetime the broker granted, so that
    a connection is never used past it. None when the session does not expire."""
    if session_lifetime_ms <= 0:
        return None
    share = (rng or random).uniform(0.85, 0.95)
    return now + session_lifetime_ms / 1000 * share


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"
