"""The SASL authenticator of one connection, sans-IO (Kafka's SaslServerAuthenticator).

It screens every request of a SASL connection before the API layer sees it:

- before authentication only ApiVersions (forwarded), SaslHandshake and SaslAuthenticate
  (answered here) are allowed; anything else closes the connection, as in Kafka;
- a v0 SaslHandshake switches to Kafka's original flow of raw, header-less SASL tokens
  (`wants_raw_token`), a v1 one to SaslAuthenticate requests;
- a failure yields the error response to send after `connection.failed.authentication.
  delay.ms`, then the close; its reason is safe to log (client strings in it are cut
  short and made printable);
- once authenticated, requests are forwarded until the session (KIP-368,
  `connections.max.reauth.ms`) expires; a SaslHandshake from a client that can
  re-authenticate (SaslAuthenticate v1+) starts a re-authentication, any other request
  after expiry closes the connection.

Time is passed in (monotonic milliseconds) so tests need no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from broker.net.client_text import printable
from broker.protocol.api import API_NAMES
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse
from broker.security.sasl_server import SaslAuthenticationFailed, SaslServer

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
MAX_REASON_CHARS = 400  # a failure's reason quotes client strings, each cut shorter


class Action(enum.Enum):
    FORWARD = "forward"  # hand the request to the API layer
    REPLY = "reply"  # send `body` (or `raw`) and read on
    FAIL = "fail"  # wait the failed-authentication delay, send `body`/`raw` if any, close
    CLOSE = "close"  # close now without an answer


class Event(enum.Enum):
    """What the metrics count (Kafka's socket-server-metrics names)."""

    AUTHENTICATED = "successful-authentication"
    AUTHENTICATED_NO_REAUTH = "successful-authentication-no-reauth"  # pre-KIP-368 clients
    REAUTHENTICATED = "successful-reauthentication"
    FAILED = "failed-authentication"
    FAILED_REAUTHENTICATION = "failed-reauthentication"
    EXPIRED = "expired-connections-killed-count"


@attrs.frozen
class Verdict:
    action: Action
    body: Any = None  # a SaslHandshakeResponse / SaslAuthenticateResponse
    raw: bytes | None = None  # a raw SASL token (v0 flow)
    event: Event | None = None
    reason: str = ""


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake-or-versions"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@attrs.frozen
class SaslSettings:
    """A listener's SASL configuration, resolved once."""

    mechanisms: Sequence[str]
    new_server: Callable[[str], SaslServer]
    reauth_ms: Mapping[str, int]  # per mechanism; 0 disables re-authentication

    def session_lifetime_ms(self, mechanism: str) -> int:
        return self.reauth_ms.get(mechanism, 0)


class SaslAuthenticator:
    """One connection's SASL state; see the module docstring for the rules."""

    def __init__(self, settings: SaslSettings) -> None:
        self._settings = settings
        self.state = State.HANDSHAKE_OR_VERSIONS
        self._raw_tokens = False
        self._server: SaslServer | None = None
        self._mechanism = ""
        self.principal = ""
        self._supports_reauth = False
        self._reauthenticating = False
        self.session_expires_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def wants_raw_token(self) -> bool:
        """After a v0 SaslHandshake the next frames are bare tokens, not requests."""
        return self.state is State.AUTHENTICATE and self._raw_tokens

    @property
    def reauthenticating(self) -> bool:
        return self._reauthenticating

    @property
    def supports_reauthentication(self) -> bool:
        """Whether the client used SaslAuthenticate v1+ (KIP-368), so can re-authenticate."""
        return self._supports_reauth

    # -- requests --------------------------------------------------------------------
    def on_request(self, api_key: int, api_version: int, body: Any, now_ms: int) -> Verdict:
        if self.state is State.COMPLETE:
            return self._authenticated_request(api_key, api_version, body, now_ms)
        if self.state is State.HANDSHAKE_OR_VERSIONS:
            if api_key == API_VERSIONS and not self._reauthenticating:
                return Verdict(Action.FORWARD)
            if api_key == SASL_HANDSHAKE:
                return self._handshake(api_version, body.mechanism)
            return self._illegal(api_key)
        if self.state is State.AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            if self._raw_tokens:
                return self._illegal(api_key)
            if api_version >= 1:
                self._supports_reauth = True
            return self._authenticate(bytes(body.auth_bytes), api_version, now_ms)
        return self._illegal(api_key)

    def on_raw_token(self, token: bytes, now_ms: int) -> Verdict:
        """A header-less token of the v0 flow: failures close without an answer."""
        verdict = self._authenticate(token, None, now_ms)
        if verdict.action is Action.REPLY:
            return attrs.evolve(verdict, raw=verdict.body.auth_bytes, body=None)
        return attrs.evolve(verdict, body=None)

    # -- the steps ----------------------------------------------------------------------
    def _authenticated_request(
        self, api_key: int, api_version: int, body: Any, now_ms: int
    ) -> Verdict:
        if api_key == SASL_HANDSHAKE and self._supports_reauth:
            self._reauthenticating = True
            self.state = State.HANDSHAKE_OR_VERSIONS
            if body.mechanism != self._mechanism:
                return self._fail(
                    SaslHandshakeResponse(
                        error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                        mechanisms=tuple(self._settings.mechanisms),
                    ),
                    f"SASL mechanism '{printable(body.mechanism)}' requested by the client differs from "
                    f"the one of the session being re-authenticated ('{self._mechanism}')",
                )
            return self._handshake(api_version, body.mechanism)
        if self.session_expires_ms is not None and now_ms > self.session_expires_ms:
            self.state = State.FAILED
            return Verdict(
                Action.CLOSE,
                event=Event.EXPIRED,
                reason="the SASL session expired (connections.max.reauth.ms) and the client "
                "did not re-authenticate",
            )
        return Verdict(Action.FORWARD)

    def _handshake(self, api_version: int, mechanism: str) -> Verdict:
        enabled = tuple(self._settings.mechanisms)
        if mechanism not in enabled:
            return self._fail(
                SaslHandshakeResponse(
                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                ),
                f"Unsupported SASL mechanism {printable(mechanism)}",
            )
        self._mechanism = mechanism
        self._server = self._settings.new_server(mechanism)
        self._raw_tokens = api_version == 0
        self.state = State.AUTHENTICATE
        return Verdict(
            Action.REPLY, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)
        )

    def _authenticate(self, token: bytes, api_version: int | None, now_ms: int) -> Verdict:
        assert self._server is not None
        try:
            reply = self._server.evaluate(token)
        except SaslAuthenticationFailed as exc:
            # What the exchange says may quote the client's token: bounded, printable.
            message = printable(str(exc), MAX_REASON_CHARS)
            return self._fail(
                SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message
                ),
                message,
            )
        if not self._server.complete:
            return Verdict(
                Action.REPLY, SaslAuthenticateResponse(error_message=None, auth_bytes=reply)
            )
        principal = f"User:{self._server.username}"
        if self._reauthenticating and principal != self.principal:
            return self._fail(
                SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                    error_message=(
                        f"Cannot change principals during re-authentication from "
                        f"{self.principal} to {principal}"
                    ),
                ),
                "the principal changed during re-authentication",
            )
        lifetime = self._settings.session_lifetime_ms(self._mechanism)
        self.session_expires_ms = now_ms + lifetime if lifetime > 0 else None
        event = Event.REAUTHENTICATED if self._reauthenticating else Event.AUTHENTICATED
        self.principal = principal
        self.state = State.COMPLETE
        self._reauthenticating = False
        return Verdict(
            Action.REPLY,
            SaslAuthenticateResponse(
                error_message=None,
                auth_bytes=reply,
                session_lifetime_ms=lifetime if lifetime > 0 and api_version else 0,
            ),
            event=event,
        )

    def _fail(self, body: Any, reason: str) -> Verdict:
        event = Event.FAILED_REAUTHENTICATION if self._reauthenticating else Event.FAILED
        self.state = State.FAILED
        return Verdict(Action.FAIL, body, event=event, reason=reason)

    def _illegal(self, api_key: int) -> Verdict:
        name = API_NAMES.get(api_key, str(api_key))
        reason = f"Unexpected Kafka request of type {name} during SASL authentication"
        if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            body: Any = (
                SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)
                if api_key == SASL_HANDSHAKE
                else SaslAuthenticateResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=reason
                )
            )
            return self._fail(body, reason)
        self.state = State.FAILED
        event = Event.FAILED_REAUTHENTICATION if self._reauthenticating else Event.FAILED
        return Verdict(Action.CLOSE, event=event, reason=reason)
