"""Server sides of the SASL mechanisms, sans-IO: feed a client token, get the server's.

Each exchange object lives for one authentication. `evaluate` returns the token to
send back (possibly empty) or raises `SaslAuthenticationFailed`; `complete` says
whether the exchange has finished successfully and `username` who authenticated.
Arbitrary client bytes only ever end in `SaslAuthenticationFailed`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Protocol

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

# Keys the fake credentials of unknown users; random per process.
_FAKE_CREDENTIAL_KEY = secrets.token_bytes(32)
MAX_SCRAM_MESSAGE = 4096
"""Longer SCRAM messages are refused unread: a user name, a nonce and Kafka's few
extensions fit in a fraction of it."""
# RFC 5802 §7, as Kafka's ScramMessages reads it: printable nonces without a comma,
# `name=value` extensions, a user name with `=2C`/`=3D` escapes only.
_NONCE = r"[\x21-\x2b\x2d-\x7e]+"
_EXTENSIONS = r"(?:,[a-zA-Z]+=[^,]*)*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>[ny],(?:a=(?P<authzid>[^,]*))?,)"
    rf"(?P<bare>n=(?P<saslname>[^,]+),r=(?P<nonce>{_NONCE}){_EXTENSIONS})"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<binding>[A-Za-z0-9+/=]+),r=(?P<nonce>{_NONCE}){_EXTENSIONS})"
    r",p=(?P<proof>[A-Za-z0-9+/=]+)"
)
_SASLNAME_ESCAPE = re.compile(r"=(?!2C|3D)")


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
    """RFC 5802 / 7677, server side: client-first to server-first, client-final to
    server-final. Kafka sends no `e=` server-final on failure: it answers with
    SASL_AUTHENTICATION_FAILED, which is what raising here leads to.

    Written out rather than through a SCRAM library: the messages are matched by
    regular expressions and checked with HMACs in C, so a login costs tens of
    microseconds whatever the client sends (a library's per-character checks made a
    10 KB user name cost 30 ms). As in Kafka, the user name is not SASLprep'd; the
    stored credential already holds StoredKey and ServerKey, so no PBKDF2 runs."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        info = MECHANISM_BY_NAME.get(mechanism)
        if info is None:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._hash = info.hash_name
        self._lookup = lookup
        self._step = 0
        self._username = ""
        self._known = False
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._step == 2

    @property
    def username(self) -> str:
        return self._username if self.complete else ""

    def evaluate(self, token: bytes) -> bytes:
        step, self._step = self._step, 3  # failed, unless the step succeeds
        if step > 1:
            raise self._failed("the SCRAM exchange is already complete")
        if len(token) > MAX_SCRAM_MESSAGE:
            raise self._failed(f"a SCRAM message over {MAX_SCRAM_MESSAGE} bytes")
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed("the SCRAM message is not UTF-8") from None
        reply = self._client_first(message) if step == 0 else self._client_final(message)
        self._step = step + 1
        return reply.encode()

    def _client_first(self, message: str) -> str:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise self._failed("invalid client-first message")
        saslname = match["saslname"]
        if _SASLNAME_ESCAPE.search(saslname):
            raise self._failed("invalid user name in the client-first message")
        username = saslname.replace("=2C", ",").replace("=3D", "=")
        authzid = match["authzid"]
        if authzid and authzid != username:
            raise self._failed(
                "Client requested an authorization id that is different from username"
            )
        credential = self._lookup(username, self.mechanism)
        self._known = credential is not None
        self._credential = credential or fake_credential(username, self.mechanism)
        self._username = username
        self._gs2_header = match["gs2"]
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + secrets.token_urlsafe(18).replace("-", "+")
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first

    def _client_final(self, message: str) -> str:
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise self._failed("invalid client-final message")
        if match["binding"] != base64.b64encode(self._gs2_header.encode()).decode():
            raise self._failed("the channel binding does not match the client-first header")
        # Kafka accepts a client-final nonce that *ends with* the server-first one:
        # librdkafka before 2.x sends `r=<client nonce><server-first nonce>`.
        if not match["nonce"].endswith(self._nonce):
            raise self._failed("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise self._failed("the client proof is not base64") from None
        credential = self._credential
        assert credential is not None
        auth_message = (
            f"{self._client_first_bare},{self._server_first},{match['without_proof']}"
        ).encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        n = min(len(proof), len(signature))  # one XOR of two ints, not a byte loop
        client_key = (int.from_bytes(proof[:n]) ^ int.from_bytes(signature[:n])).to_bytes(n)
        stored_key = hashlib.new(self._hash, client_key).digest()
        if (
            not hmac.compare_digest(stored_key, credential.stored_key)
            or len(proof) != len(signature)
            or not self._known
        ):
            raise self._failed("The client keys don't match.: invalid-proof")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return "v=" + base64.b64encode(server_signature).decode()

    def _failed(self, why: str) -> SaslAuthenticationFailed:
        return SaslAuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}: {why}"
        )
