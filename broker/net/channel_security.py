"""A listener's channel security (Kafka's ChannelBuilder + authenticators), on Trio.

`ListenerSecurity.establish` runs in the connection's own task before its first
request: the TLS handshake (so a slow or broken handshake only ever holds up its own
connection), the principal from a client certificate, and for SASL listeners a
`SaslChannel` that screens requests until the client has authenticated. Failures
close that connection only; they are logged and counted in socket-server-metrics.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

import attrs
import trio

from broker.config import BrokerConfig, ConfigError
from broker.metrics import Meter, MetricSample
from broker.net.authenticator import (
    Action,
    Event,
    SaslAuthenticator,
    SaslSettings,
    State,
    Verdict,
)
from broker.net.client_text import printable
from broker.net.connection import Connection
from broker.net.delayed_close import DelayedCloseQueue
from broker.net.endpoint import Endpoint
from broker.net.log_limiter import LogLimiter
from broker.net.request import Buffer, Request
from broker.net.tls_stream import HandshakeEof, TlsServerStream
from broker.protocol.api import encode_response
from broker.protocol.framing import Frame
from broker.security.jaas import parse_jaas_config
from broker.security.principal_mapping import NoMatchingRule, SslPrincipalMapper
from broker.security.sasl_server import (
    PLAIN,
    PlainSaslServer,
    SaslServer,
    ScramSaslServer,
)
from broker.security.scram_credentials import ScramCredentialStore
from broker.security.ssl_context import build_server_context, principal_mapper, subject_dn

log = logging.getLogger(__name__)
# Failed authentications and TLS handshakes are the client's to trigger at will.
_failures = LogLimiter(log)

WriteFn = Callable[[Connection, Sequence[Buffer]], Awaitable[None]]
ReceiveFrameFn = Callable[[Connection], Awaitable[tuple[Frame, int] | None]]


class AuthMetrics:
    """Kafka's authentication meters of one processor (replaced by registered ones)."""

    def __init__(self) -> None:
        self.meters: dict[Event, Meter] = {event: Meter() for event in Event}

    def mark(self, event: Event | None) -> None:
        if event is not None:
            self.meters[event].mark()


def tls_connection_samples(
    connections: Iterable[tuple[str, int, Iterable[Connection]]],
) -> Iterator[MetricSample]:
    """Kafka's `connections{cipher,protocol}` gauge: open TLS connections per listener,
    processor, cipher and TLS version, counted when the metrics are read."""
    for listener, processor_id, open_connections in connections:
        counts: Counter[tuple[str, str]] = Counter()
        for connection in list(open_connections):
            stream = connection.stream
            if isinstance(stream, TlsServerStream) and (cipher := stream.cipher()) is not None:
                counts[(cipher[0], stream.version() or "unknown")] += 1
        for (cipher_name, version), count in sorted(counts.items()):
            tags = (
                ("cipher", cipher_name),
                ("listener", listener),
                ("networkProcessor", str(processor_id)),
                ("protocol", version),
            )
            yield MetricSample(
                "kafka.server",
                "socket-server-metrics",
                "connections",
                tags,
                "gauge",
                {"value": float(count)},
            )


@attrs.frozen
class ConnectionIO:
    """What the channel needs from its processor: frames in, bytes out, pool release."""

    write: WriteFn
    receive_frame: ReceiveFrameFn
    release: Callable[[int], None]


class ListenerSecurity:
    """TLS and/or SASL of one listener, built once from the config."""

    def __init__(
        self,
        listener: str,
        ssl_context: ssl.SSLContext | None,
        mapper: SslPrincipalMapper | None,
        sasl: SaslSettings | None,
        failed_auth_delay_s: float,
        sasl_max_receive: int,
    ) -> None:
        self.listener = listener
        self.ssl_context = ssl_context
        self._mapper = mapper
        self.sasl = sasl
        self._delay_s = failed_auth_delay_s
        self._sasl_max_receive = sasl_max_receive
        # Connections that failed authentication, waiting out the delay (KIP-306).
        self.delayed_closes = DelayedCloseQueue()

    @classmethod
    def for_endpoint(
        cls, config: BrokerConfig, endpoint: Endpoint, credentials: ScramCredentialStore
    ) -> ListenerSecurity | None:
        """None for PLAINTEXT listeners, whose connections need nothing."""
        protocol = endpoint.security_protocol
        listener = endpoint.listener_name
        if protocol == "PLAINTEXT":
            return None
        context = mapper = None
        if protocol in ("SSL", "SASL_SSL"):
            context = build_server_context(config, listener)
            mapper = principal_mapper(config, listener)
        sasl = sasl_settings(config, listener, credentials) if protocol.startswith("SASL") else None
        return cls(
            listener,
            context,
            mapper,
            sasl,
            config.network.connection_failed_authentication_delay_ms / 1000,
            config.network.listener(listener).sasl_server_max_receive_size,
        )

    async def establish(
        self, connection: Connection, io: ConnectionIO, metrics: AuthMetrics
    ) -> bool:
        """TLS handshake and SASL set-up; False when the connection must close."""
        if self.ssl_context is not None and not await self._tls_handshake(connection, metrics):
            return False
        if self.sasl is not None:
            connection.sasl = SaslChannel(
                connection,
                SaslAuthenticator(self.sasl),
                io,
                metrics,
                FailedAuthenticationDelay(self._delay_s, self.delayed_closes),
            )
            connection.sasl.limit_receive(self._sasl_max_receive)
        return True

    async def _tls_handshake(self, connection: Connection, metrics: AuthMetrics) -> bool:
        assert self.ssl_context is not None
        stream = TlsServerStream(connection.stream, self.ssl_context)
        connection.stream = stream
        try:
            await stream.do_handshake()
        except HandshakeEof:
            log.debug("connection %s closed before the end of the TLS handshake", connection.id)
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            _failures.log(
                logging.INFO,
                "closing connection %s: failed TLS handshake: %s",
                connection.id,
                printable(str(exc)),
            )
            metrics.mark(Event.FAILED)
            return False
        connection.touch()
        certificate = stream.getpeercert()
        if certificate and self._mapper is not None and self.sasl is None:
            dn = subject_dn(certificate)
            try:
                name = self._mapper.name(dn)
            except NoMatchingRule as exc:
                _failures.log(
                    logging.INFO,
                    "closing connection %s: %s",
                    connection.id,
                    printable(str(exc), 400),
                )
                metrics.mark(Event.FAILED)
                return False
            connection.context = attrs.evolve(connection.context, principal=f"User:{name}")
        if self.sasl is None:
            metrics.mark(Event.AUTHENTICATED)
        return True


@attrs.frozen
class FailedAuthenticationDelay:
    """`connection.failed.authentication.delay.ms` of a listener and the queue that
    closes its failed connections once it has passed."""

    delay_s: float
    queue: DelayedCloseQueue


class SaslChannel:
    """Drives a connection's `SaslAuthenticator` from the processor's connection task."""

    def __init__(
        self,
        connection: Connection,
        authenticator: SaslAuthenticator,
        io: ConnectionIO,
        metrics: AuthMetrics,
        failure_delay: FailedAuthenticationDelay,
    ) -> None:
        self._connection = connection
        self.authenticator = authenticator
        self._io = io
        self._metrics = metrics
        self._failure_delay = failure_delay
        self._normal_max_receive = connection.decoder.max_size

    def limit_receive(self, max_size: int) -> None:
        """`sasl.server.max.receive.size` caps frames until authentication completes."""
        self._connection.decoder.max_size = min(max_size, self._normal_max_receive)

    @property
    def wants_raw_token(self) -> bool:
        return self.authenticator.wants_raw_token

    async def screen(self, request: Request) -> bool:
        """True to hand the request on to the API layer; False when it was answered
        here or the connection is closing (`closing` set)."""
        verdict = self.authenticator.on_request(
            request.api_key, request.api_version, request.body, _now_ms()
        )
        if verdict.action is Action.FORWARD:
            return True
        try:
            await self._carry_out(verdict, request)
        finally:
            request.release_memory()
        return False

    async def receive_raw_token(self) -> bool:
        """One bare token of the v0 flow; False at end of stream or when closing."""
        received = await self._io.receive_frame(self._connection)
        if received is None:
            return False
        token, memory = received
        if memory:
            self._io.release(memory)
        verdict = self.authenticator.on_raw_token(bytes(token), _now_ms())
        await self._carry_out(verdict, None)
        return not self.closing

    @property
    def closing(self) -> bool:
        return self.authenticator.state is State.FAILED

    async def _carry_out(self, verdict: Verdict, request: Request | None) -> None:
        connection = self._connection
        self._metrics.mark(verdict.event)
        if (
            verdict.event is Event.AUTHENTICATED
            and not self.authenticator.supports_reauthentication
        ):
            self._metrics.mark(Event.AUTHENTICATED_NO_REAUTH)
        if verdict.action is Action.CLOSE:
            _failures.log(
                logging.INFO, "closing connection %s: %s", connection.id, printable(verdict.reason)
            )
            return
        if verdict.action is Action.FAIL:
            _failures.log(
                logging.INFO,
                "closing connection %s: %s (listener %s, from %s)",
                connection.id,
                printable(verdict.reason),
                connection.listener_name,
                connection.remote_ip,
            )
            await self._fail(verdict, request)
            return
        await self._io.write(connection, self._encode(verdict, request))
        if verdict.event in (Event.AUTHENTICATED, Event.REAUTHENTICATED):
            connection.context = attrs.evolve(
                connection.context, principal=self.authenticator.principal
            )
            connection.decoder.max_size = self._normal_max_receive

    async def _fail(self, verdict: Verdict, request: Request | None) -> None:
        """Kafka (KIP-306) sends the failure's answer only after the delay, then closes.
        The socket is handed to the listener's delayed-close queue, so the connection's
        task ends now; the processor's close of the (detached) stream leaves it open."""
        chunks = self._encode(verdict, request)
        delay_s = self._failure_delay.delay_s
        if delay_s <= 0:
            await self._io.write(self._connection, chunks)
            return
        finish = _detach(self._connection, b"".join(chunks))
        if finish is None:  # not on a socket (an in-memory stream in tests)
            await trio.sleep(delay_s)
            await self._io.write(self._connection, chunks)
            return
        self._failure_delay.queue.add(trio.current_time() + delay_s, finish)

    def _encode(self, verdict: Verdict, request: Request | None) -> list[Buffer]:
        if verdict.raw is not None:
            return [len(verdict.raw).to_bytes(4, "big"), verdict.raw]
        if verdict.body is not None and request is not None:
            return encode_response(
                request.api_key, request.api_version, request.correlation_id, verdict.body
            )
        return []


def _detach(connection: Connection, answer: bytes) -> Callable[[], None] | None:
    """Take the connection's socket away from its stream (whose close then does
    nothing) and return what sends `answer` and closes it; None when there is no
    socket. Under TLS the answer is encrypted now, while the TLS engine is at hand."""
    stream = connection.stream
    if isinstance(stream, TlsServerStream):
        answer = stream.encrypt(answer)
        stream = stream.transport
    if type(stream) is not trio.SocketStream:
        return None
    trio.lowlevel.notify_closing(stream.socket)
    sock = socket.socket(fileno=stream.socket.detach())
    sock.setblocking(False)

    def finish() -> None:
        try:
            if answer:
                # A small answer into an idle socket's empty send buffer goes whole;
                # when it does not, the client sees the close, as after any failure.
                sock.send(answer)
        except OSError:
            pass
        finally:
            sock.close()

    return finish


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def sasl_settings(
    config: BrokerConfig, listener: str, credentials: ScramCredentialStore
) -> SaslSettings:
    """The listener's mechanisms, PLAIN users and session lifetimes."""
    settings = config.security.listener(listener)
    mechanisms_key, mechanisms = settings.sasl_enabled_mechanisms
    if not mechanisms:
        raise ConfigError(f"{mechanisms_key}: a SASL listener needs at least one mechanism")
    plain_users: dict[str, str] = {}
    if PLAIN in mechanisms:
        jaas_key, jaas = settings.plain_jaas_config
        if jaas is None:
            raise ConfigError(
                f"{BrokerConfig.listener_key(listener, 'plain.sasl.jaas.config')}: PLAIN is "
                f"enabled on listener {listener} but no JAAS config with its users is set"
            )
        plain_users = parse_jaas_config(jaas, jaas_key).plain_users()

    def new_server(mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainSaslServer(plain_users)
        return ScramSaslServer(mechanism, credentials.get)

    reauth = dict(settings.connections_max_reauth_ms)
    return SaslSettings(tuple(mechanisms), new_server, reauth)
