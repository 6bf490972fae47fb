"""Server sides of the SASL mechanisms, sans-IO: feed a client token, get the server's.

Each exchange object lives for one authentication. `evaluate` returns the token to
send back (possibly empty) or raises `SaslAuthenticationFailed`; `complete` says
whether the exchange has finished successfully and `username` who authenticated.
Arbitrary client bytes only ever end in `SaslAuthenticationFailed`.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from typing import Protocol

import scramp

from broker.security.scram_credentials import (
    MECHANISM_BY_NAME,
    MIN_ITERATIONS,
    ScramCredential,
)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslAuthenticationFailed(Exception):
    """The client failed to authenticate; the message is what the client is told."""


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...

    def evaluate(self, token: bytes) -> bytes: ...


class PlainSaslServer:
    """RFC 4616: one message `authzid NUL authcid NUL passwd`, checked against the
    listener's JAAS users in constant time."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._username = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def username(self) -> str:
        return self._username

    def evaluate(self, token: bytes) -> bytes:
        if self._complete:
            raise SaslAuthenticationFailed("Authentication failed: PLAIN exchange already done")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed(
                "Authentication failed: the PLAIN message is not UTF-8"
            ) from None
        parts = text.split("\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed(
                "Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts))
            )
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare_digest on both branches so an unknown user takes as long as a wrong password.
        known = expected is not None
        if not hmac.compare_digest((expected or "").encode(), password.encode()) or not known:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._username = username
        self._complete = True
        return b""


CredentialLookup = Callable[[str, str], ScramCredential | None]
"""(user, mechanism) to the stored credential, or None for an unknown user."""

# Built once: a login only makes the per-exchange server object.
_MECHANISMS = {name: scramp.ScramMechanism(name) for name in MECHANISM_BY_NAME}
# Keys the fake credentials of unknown users; random per process.
_FAKE_CREDENTIAL_KEY = secrets.token_bytes(32)


def fake_credential(username: str, mechanism: str) -> ScramCredential:
    """A credential no password matches, the same for a name every time it is asked
    for (a salt that changed between logins would tell that the user is unknown).

    RFC 5802 §5.1: a server answers an unknown user with a made-up salt, so the
    exchange fails at the proof like a wrong password, in as many steps and about as
    long, and does not tell which user names exist. Two HMACs, no PBKDF2."""
    info = MECHANISM_BY_NAME[mechanism]
    seed = hmac.digest(_FAKE_CREDENTIAL_KEY, f"{mechanism}\0{username}".encode(), "sha256")
    keys = hmac.digest(seed, b"keys", info.hash_name)
    return ScramCredential(seed[:16], keys, keys[::-1], MIN_ITERATIONS)


class ScramSaslServer:
    """RFC 5802 / 7677 through `scramp`: client-first to server-first, client-final to
    server-final. Kafka sends no `e=` server-final on failure: it answers with
    SASL_AUTHENTICATION_FAILED, which is what raising here leads to."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        if mechanism not in MECHANISM_BY_NAME:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._lookup = lookup
        self._server = _MECHANISMS[mechanism].make_server(self._auth_info)
        self._step = 0
        self._username = ""

    @property
    def complete(self) -> bool:
        return self._step == 2

    @property
    def username(self) -> str:
        return self._username

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            credential = fake_credential(username, self.mechanism)
        else:
            self._username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed("the SCRAM message is not UTF-8") from None
        try:
            if self._step == 0:
                self._server.set_client_first(message)
                reply = self._server.get_server_first()
            elif self._step == 1:
                self._accept_kafka_nonce(message)
                self._server.set_client_final(message)
                reply = self._server.get_server_final()
            else:
                raise self._failed("the SCRAM exchange is already complete")
        except SaslAuthenticationFailed:
            raise
        except scramp.ScramException as exc:
            self._step = 3
            raise self._failed(str(exc)) from None
        except Exception as exc:  # scramp raises a few non-SCRAM errors on odd input
            self._step = 3
            raise self._failed(f"invalid SCRAM message ({type(exc).__name__})") from None
        self._step += 1
        return str(reply).encode()

    def _accept_kafka_nonce(self, client_final: str) -> None:
        """Kafka accepts a client-final nonce that *ends with* the server-first one, and
        librdkafka before 2.x sends `r=<client nonce><server-first nonce>` (the client
        part twice); scramp insists on equality, so its expected nonce is aligned with
        what the client sent when Kafka's rule holds. The proof still covers the message
        as sent, and the server's random part must still be there."""
        received = next((p[2:] for p in client_final.split(",") if p.startswith("r=")), None)
        expected = self._server.nonce
        if received is None or expected is None:
            return
        if received != str(expected) and received.endswith(str(expected)):
            self._server.nonce = type(expected)(received)

    def _failed(self, why: str) -> SaslAuthenticationFailed:
        return SaslAuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}: {why}"
        )
