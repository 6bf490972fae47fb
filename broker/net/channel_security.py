"""A listener's channel security (Kafka's ChannelBuilder + authenticators), on Trio.

`ListenerSecurity.tls_handshake` runs in the connection's own task before its first
request (so a slow or broken handshake only ever holds up its own connection) and
gives the TLS stream and the principal of a client certificate. On SASL listeners the
connection's state machine (kafka_connection) screens requests with a
`SaslAuthenticator` until the client has authenticated, and `carry_out` does the I/O
of its verdicts: the answer, or the failed-authentication delay and close (KIP-306).
Failures close that connection only; they are logged and counted in
socket-server-metrics. Nothing here knows the connection object: it gets a stream and
names, and returns what the connection then holds.
"""

from __future__ import annotations

import logging
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

import attrs
import trio

from broker.config import BrokerConfig, ConfigError
from broker.metrics import Meter, MetricSample
from broker.net.authenticator import Action, Event, SaslAuthenticator, SaslSettings
from broker.net.client_text import printable
from broker.net.delayed_close import DelayedCloseQueue
from broker.net.endpoint import Endpoint
from broker.net.kafka_connection import SaslAnswer
from broker.net.log_limiter import LogLimiter
from broker.net.request import Buffer
from broker.net.socket_stream import FastSocketStream
from broker.net.tls_stream import HandshakeEof, TlsServerStream
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

WriteFn = Callable[[Sequence[Buffer]], Awaitable[None]]


class AuthMetrics:
    """Kafka's authentication meters of one processor."""

    def __init__(self, meters: dict[Event, Meter] | None = None) -> None:
        self.meters: dict[Event, Meter] = meters or {event: Meter() for event in Event}

    def mark(self, event: Event | None) -> None:
        if event is not None:
            self.meters[event].mark()


def tls_connection_samples(
    connections: Iterable[tuple[str, int, Iterable[trio.abc.Stream]]],
) -> Iterator[MetricSample]:
    """Kafka's `connections{cipher,protocol}` gauge: open TLS connections per listener,
    processor, cipher and TLS version, counted when the metrics are read (from the
    connections' streams)."""
    for listener, processor_id, streams in connections:
        counts: Counter[tuple[str, str]] = Counter()
        for stream in list(streams):
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
class TlsEstablished:
    """A connection's TLS stream, and the principal its client certificate maps to."""

    stream: TlsServerStream
    principal: str | None


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

    def new_authenticator(self) -> SaslAuthenticator | None:
        """A connection's SASL state, on SASL listeners."""
        return None if self.sasl is None else SaslAuthenticator(self.sasl)

    @property
    def sasl_max_receive(self) -> int:
        """`sasl.server.max.receive.size`: the frame limit until authentication completes."""
        return self._sasl_max_receive

    async def tls_handshake(
        self, transport: trio.abc.Stream, connection_id: str, metrics: AuthMetrics
    ) -> TlsEstablished | None:
        """The TLS handshake over `transport`; None when the connection must close."""
        assert self.ssl_context is not None
        stream = TlsServerStream(transport, self.ssl_context)
        try:
            await stream.do_handshake()
        except HandshakeEof:
            log.debug("connection %s closed before the end of the TLS handshake", connection_id)
            return None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            _failures.log(
                logging.INFO,
                "closing connection %s: failed TLS handshake: %s",
                connection_id,
                printable(str(exc)),
            )
            metrics.mark(Event.FAILED)
            return None
        principal = None
        certificate = stream.getpeercert()
        if certificate and self._mapper is not None and self.sasl is None:
            dn = subject_dn(certificate)
            try:
                name = self._mapper.name(dn)
            except NoMatchingRule as exc:
                _failures.log(
                    logging.INFO,
                    "closing connection %s: %s",
                    connection_id,
                    printable(str(exc), 400),
                )
                metrics.mark(Event.FAILED)
                return None
            principal = f"User:{name}"
        if self.sasl is None:
            metrics.mark(Event.AUTHENTICATED)
        return TlsEstablished(stream, principal)

    async def carry_out(
        self,
        answer: SaslAnswer,
        stream: trio.abc.Stream,
        write: WriteFn,
        connection_id: str,
        peer: tuple[str, str],
        metrics: AuthMetrics,
        no_reauthentication: bool,
    ) -> None:
        """The I/O of a SASL verdict: count it, log a failure, write the answer; a failed
        login's answer waits out the delay (KIP-306). `peer`: listener and client IP."""
        verdict = answer.verdict
        metrics.mark(verdict.event)
        if verdict.event is Event.AUTHENTICATED and no_reauthentication:
            metrics.mark(Event.AUTHENTICATED_NO_REAUTH)
        if verdict.action is Action.CLOSE:
            _failures.log(
                logging.INFO, "closing connection %s: %s", connection_id, printable(verdict.reason)
            )
            return
        if verdict.action is Action.FAIL:
            _failures.log(
                logging.INFO,
                "closing connection %s: %s (listener %s, from %s)",
                connection_id,
                printable(verdict.reason),
                peer[0],
                peer[1],
            )
            await self._fail(answer.answer, stream, write)
            return
        await write(answer.answer)

    async def _fail(
        self, chunks: Sequence[Buffer], stream: trio.abc.Stream, write: WriteFn
    ) -> None:
        """Kafka (KIP-306) sends the failure's answer only after the delay, then closes.
        The socket is handed to the listener's delayed-close queue, so the connection's
        task ends now; its close of the (detached) stream leaves the socket open."""
        delay_s = self._delay_s
        if delay_s <= 0:
            await write(chunks)
            return
        finish = _detach(stream, b"".join(chunks))
        if finish is None:  # not on a socket (an in-memory stream in tests)
            await trio.sleep(delay_s)
            await write(chunks)
            return
        self.delayed_closes.add(trio.current_time() + delay_s, finish)


def _detach(stream: trio.abc.Stream, answer: bytes) -> Callable[[], None] | None:
    """Take the connection's socket away from its stream (whose close then does
    nothing) and return what sends `answer` and closes it; None when there is no
    socket. Under TLS the answer is encrypted now, while the TLS engine is at hand."""
    if isinstance(stream, TlsServerStream):
        answer = stream.encrypt(answer)
        stream = stream.transport
    if not isinstance(stream, FastSocketStream):
        return None
    sock = stream.detach()

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
