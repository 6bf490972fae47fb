"""A client session: one connection to the bootstrap broker plus the API versions
both sides support, so every command asks for the highest common version.

Errors a user should read (cannot connect, a Kafka error code, a missing API)
are `ClientError`s carrying one line; the CLI prints that line and exits 1.
"""

from __future__ import annotations

import ssl
from typing import Any

import trio

from broker.client.bootstrap_servers import (
    DEFAULT_PORT,
    BootstrapServersError,
    parse_bootstrap_servers,
)
from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.client.sasl_client import (
    SASL_HANDSHAKE_VERSION,
    SaslAuthenticationError,
    SaslAuthenticator,
    reauthentication_due,
)
from broker.client.security_config import (
    PLAINTEXT_CONFIG,
    SaslCredentials,
    SecurityConfig,
    SecurityConfigError,
)
from broker.client.tls_context import build_ssl_context
from broker.protocol.api import (
    SUPPORTED_VERSIONS,
    DecodeError,
    EncodeError,
    RequestHeader,
    encode_request,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from broker.protocol.messages.registry import API_NAMES

DEFAULT_BOOTSTRAP = f"127.0.0.1:{DEFAULT_PORT}"
CLIENT_ID = "broker-client"
# ApiVersions v3+ carries the client software name (KIP-511).
_SOFTWARE_NAME = "broker-client"
_SOFTWARE_VERSION = "0.1.0"


class ClientError(Exception):
    """A failure reported to the user as one line, without a traceback."""


class ConnectionLost(ClientError):
    """The connection closed, failed or stopped answering: this session is done with,
    though a new connection may well succeed (a broker process that restarted)."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def check_error(code: int, what: str, message: str | None = None) -> None:
    """Raise a ClientError naming the Kafka error code, unless it is NONE."""
    if code != ErrorCode.NONE:
        detail = f" ({message})" if message else ""
        raise ClientError(f"{what}: {error_name(code)}{detail}")


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """The `--bootstrap-server` list (see `parse_bootstrap_servers`)."""
    try:
        return parse_bootstrap_servers(value, "--bootstrap-server")
    except BootstrapServersError as exc:
        raise ClientError(str(exc)) from None


def tls_failure(error: BaseException) -> str:
    """Why a TLS handshake failed, in a line (trio wraps the ssl error)."""
    cause = error.__cause__ or error
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        return f"{cause.reason or cause} (is the listener SSL or SASL_SSL?)"
    return str(cause) or type(cause).__name__


async def _connect_first(
    addresses: list[tuple[str, int]], context: ssl.SSLContext | None, timeout_s: float
) -> KafkaConnection:
    """A connection to the first address that accepts one, as Kafka's clients use their
    bootstrap list; the error names every address tried when none does."""
    failures = []
    for host, port in addresses:
        try:
            return await _connect(host, port, context, timeout_s)
        except ClientError as exc:
            failures.append(str(exc))
    if len(failures) == 1:
        raise ClientError(failures[0])
    raise ClientError(f"no bootstrap server reachable ({'; '.join(failures)})")


async def _connect(
    host: str, port: int, context: ssl.SSLContext | None, timeout_s: float
) -> KafkaConnection:
    with trio.move_on_after(timeout_s):
        try:
            return await KafkaConnection.connect(host, port, CLIENT_ID, context)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ClientError(f"cannot connect to {host}:{port}: {reason}") from None
        except trio.BrokenResourceError as exc:
            raise ClientError(
                f"TLS handshake with {host}:{port} failed: {tls_failure(exc)}"
            ) from None
    raise ClientError(f"cannot connect to {host}:{port}: timed out after {timeout_s}s")


class ClientSession:
    """One connection plus the broker's advertised API version ranges."""

    def __init__(
        self,
        connection: KafkaConnection,
        broker_versions: dict[int, tuple[int, int]],
        security: SecurityConfig = PLAINTEXT_CONFIG,
    ) -> None:
        self.connection = connection
        self.broker_versions = broker_versions
        self.security = security
        self._answered = 0
        self._negotiating = False
        self._reauthenticate_at: float | None = None
        self._authenticating = False

    @classmethod
    async def open(
        cls,
        bootstrap: str,
        timeout_s: float = 10.0,
        *,
        negotiate: bool = True,
        security: SecurityConfig = PLAINTEXT_CONFIG,
    ) -> ClientSession:
        """Connect (over TLS for SSL/SASL_SSL), send ApiVersions, then log in with SASL.

        ``negotiate=False`` skips ApiVersions for raw requests, unless SASL needs it.
        """
        context = None
        if security.tls is not None:
            try:
                context = build_ssl_context(security.tls)
            except SecurityConfigError as exc:
                raise ClientError(str(exc)) from None
        connection = await _connect_first(parse_bootstrap(bootstrap), context, timeout_s)
        session = cls(connection, {}, security)
        if not negotiate and security.sasl is None:
            return session
        try:
            session.broker_versions = await session._negotiate()
            if security.sasl is not None:
                await session._authenticate(security.sasl)
        except BaseException:
            await connection.aclose()
            raise
        return session

    async def _authenticate(self, credentials: SaslCredentials) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism completes; again on
        the same connection before the session lifetime the broker grants runs out."""
        self.version_for(SaslHandshakeRequest.API_KEY, SASL_HANDSHAKE_VERSION)
        version = self.version_for(SaslAuthenticateRequest.API_KEY)
        self._authenticating = True
        try:
            authenticator = SaslAuthenticator(credentials, version)
            response = await self.request(authenticator.handshake_request(), 1)
            authenticator.on_handshake_response(response)
            while (body := authenticator.next_request()) is not None:
                authenticator.on_authenticate_response(await self.request(body, version))
        except SaslAuthenticationError as exc:
            raise ClientError(str(exc)) from None
        finally:
            self._authenticating = False
        self._reauthenticate_at = reauthentication_due(
            trio.current_time(), authenticator.session_lifetime_ms
        )

    async def _reauthenticate_if_due(self) -> None:
        due = self._reauthenticate_at
        if due is None or self._authenticating or trio.current_time() < due:
            return
        assert self.security.sasl is not None
        await self._authenticate(self.security.sasl)

    async def _negotiate(self) -> dict[int, tuple[int, int]]:
        self._negotiating = True
        response = await self.request(
            ApiVersionsRequest(
                client_software_name=_SOFTWARE_NAME,
                client_software_version=_SOFTWARE_VERSION,
            ),
            3,
        )
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            response = await self.request(ApiVersionsRequest(), 0)
        assert isinstance(response, ApiVersionsResponse)
        check_error(response.error_code, "ApiVersions failed")
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    async def aclose(self) -> None:
        await self.connection.aclose()

    async def __aenter__(self) -> ClientSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def supports(self, api_key: int) -> bool:
        return api_key in self.broker_versions

    def version_for(self, api_key: int, minimum: int = 0, maximum: int | None = None) -> int:
        """The highest version both the broker and our codec implement."""
        name = API_NAMES.get(api_key, str(api_key))
        if api_key not in self.broker_versions:
            raise ClientError(f"the broker does not support {name} (api key {api_key})")
        low, high = self.broker_versions[api_key]
        ours_low, ours_high = SUPPORTED_VERSIONS[api_key]
        top = min(high, ours_high, maximum if maximum is not None else ours_high)
        bottom = max(low, ours_low, minimum)
        if top < bottom:
            raise ClientError(
                f"no common {name} version: broker {low}-{high}, client {bottom}-{ours_high}"
            )
        return top

    async def request(self, body: Any, version: int, timeout_s: float = 30.0) -> Any:
        await self._reauthenticate_if_due()
        name = API_NAMES.get(int(body.API_KEY), "request")
        with trio.move_on_after(timeout_s):
            try:
                response = await self.connection.request(body, version)
                self._answered += 1
                return response
            except (ConnectionClosed, trio.BrokenResourceError):
                raise ConnectionLost(
                    f"{name} v{version}: the broker closed the connection{self._close_hint()}"
                ) from None
            except OSError as exc:
                raise ConnectionLost(f"{name} v{version}: {exc.strerror or exc}") from None
            except (DecodeError, EncodeError) as exc:
                raise ClientError(f"{name} v{version}: {exc}") from None
        raise ConnectionLost(f"{name} v{version}: no answer within {timeout_s}s")

    def _close_hint(self) -> str:
        """A likely reason when the broker hangs up at once: a listener wanting more security.

        A TLS listener drops a plaintext ApiVersions; a SASL listener answers ApiVersions
        but closes on any request other than the SASL handshake.
        """
        if self._answered == 0 and self.security.tls is None and self._negotiating:
            return " (a TLS listener? set -X security.protocol=SSL or SASL_SSL)"
        if self._answered == 1 and self.security.sasl is None and self.broker_versions:
            return (
                " (a SASL listener? set -X security.protocol=SASL_SSL or SASL_PLAINTEXT"
                " with sasl.mechanism, sasl.username and sasl.password)"
            )
        return ""

    async def send_without_response(self, body: Any, version: int) -> None:
        """Write a request the broker will not answer (Produce with acks=0)."""
        await self._reauthenticate_if_due()
        header = RequestHeader(
            api_key=int(body.API_KEY),
            api_version=version,
            correlation_id=0x7FFFFFFF,
            client_id=CLIENT_ID,
        )
        try:
            await self.connection.send_raw(b"".join(encode_request(header, body)))
        except OSError as exc:
            raise ConnectionLost(f"send failed: {exc.strerror or exc}") from None
        except trio.BrokenResourceError:
            raise ConnectionLost("send failed: the broker closed the connection") from None
        except EncodeError as exc:
            raise ClientError(str(exc)) from None

    async def call(self, body: Any, minimum: int = 0, maximum: int | None = None) -> Any:
        """Send at the highest common version and return the decoded response."""
        version = self.version_for(int(body.API_KEY), minimum, maximum)
        return await self.request(body, version)
