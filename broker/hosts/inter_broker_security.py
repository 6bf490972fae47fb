"""How a broker among hosts connects to the others: Kafka's inter-broker client channel.

Every inter-broker client (the replica fetchers, the transaction markers and KIP-890
verification of `broker_peers.py`, the controlled shutdown) reaches another broker on
the endpoint its registration names for `inter.broker.listener.name` (or the listener
`security.inter.broker.protocol` names), speaking that listener's security protocol:
TLS trusting the listener's `ssl.truststore.*` and presenting its `ssl.keystore.*` (as
Kafka's brokers use one listener's stores on both ends), the host name checked as
`ssl.endpoint.identification.algorithm` says; SASL with
`sasl.mechanism.inter.broker.protocol` and the `username`/`password` of the listener's
JAAS config for that mechanism, as Kafka's brokers log in. So with an authorizer the
brokers are authorized as that principal, which `super.users` (or a CLUSTER_ACTION ACL)
lets do what brokers do, and nobody else.

A connection logs in again on itself before the session the other broker granted runs
out (`connections.max.reauth.ms`, KIP-368), at a random point between 85% and 95% of its
lifetime as Kafka's clients do, before the request that would find it expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import trio
import trio_util

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.client.sasl_client import (
    SaslAuthenticationError,
    SaslAuthenticator,
    reauthentication_due,
)
from broker.client.security_config import (
    SASL_MECHANISMS,
    SaslCredentials,
    SecurityConfigError,
    TlsSettings,
)
from broker.client.tls_context import build_ssl_context
from broker.config import BrokerConfig, ConfigError
from broker.coordination.broker_registration import BrokerRegistration
from broker.protocol.frame_buffers import FrameBuffers
from broker.security.jaas import parse_jaas_config

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 1


class BrokerUnreachable(ConnectionError):
    """No logged-in connection to the broker could be made (not registered on the
    inter-broker listener, refused, a failed TLS handshake or SASL login): every
    inter-broker client backs off and tries again, as after a lost connection."""


@attrs.frozen
class InterBrokerSecurity:
    listener_name: str
    protocol: str = "PLAINTEXT"
    sasl: SaslCredentials | None = None
    tls: TlsSettings | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> InterBrokerSecurity:
        """ConfigError naming the key when the broker's own login or trust cannot be had
        from the inter-broker listener's settings."""
        name = config.network.inter_broker_listener_name
        protocol = next(
            (e.security_protocol for e in config.listeners if e.listener_name == name),
            "PLAINTEXT",
        )
        listener = config.security.listener(name)
        sasl = None
        if protocol.startswith("SASL_"):
            mechanism = config.security.sasl_mechanism_inter_broker_protocol.upper()
            sasl = _own_credentials(name, mechanism, *listener.jaas_config(mechanism))
        tls = None
        if protocol.endswith("SSL"):
            trust_file = listener.ssl_truststore_location.value
            chain = listener.ssl_keystore_certificate_chain.value
            verify_host = listener.ssl_endpoint_identification_algorithm.value.lower()
            tls = TlsSettings(
                ca_file=trust_file,
                ca_pem=None if trust_file else listener.ssl_truststore_certificates.value,
                certificate_file=listener.ssl_keystore_location.value,
                certificate_pem=chain,
                key_file=listener.ssl_keystore_location.value,
                key_pem=listener.ssl_keystore_key.value if chain else None,
                key_password=listener.ssl_key_password.value,
                check_hostname=verify_host == "https",
            )
            try:
                build_ssl_context(tls)
            except (SecurityConfigError, OSError) as exc:  # ssl.SSLError among them
                raise ConfigError(
                    f"{listener.ssl_truststore_location.key}: the inter-broker listener "
                    f"{name}'s client TLS settings are unusable: {exc}"
                ) from None
        return cls(name, protocol, sasl, tls)


def _own_credentials(listener: str, mechanism: str, key: str, jaas: str | None) -> SaslCredentials:
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol: {mechanism} is not supported")
    if jaas is None:
        raise ConfigError(
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config: the "
            f"broker logs in to the inter-broker listener {listener} with {mechanism}; give "
            'its username="..." and password="..." there'
        )
    options = parse_jaas_config(jaas, key).options
    username, password = options.get("username"), options.get("password")
    if username is None or password is None:
        raise ConfigError(
            f'{key}: username="..." and password="..." are the broker\'s own '
            f"{mechanism} login to the other brokers; give both"
        )
    return SaslCredentials(mechanism, username, password)


class BrokerConnector:
    """New connections to other brokers, over TLS and logged in as the listener says."""

    def __init__(
        self,
        security: InterBrokerSecurity,
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
    ) -> None:
        self.security = security
        self._live = live_brokers
        self._ssl_context = None if security.tls is None else build_ssl_context(security.tls)

    def endpoint(self, node: int) -> tuple[str, int]:
        registration = self._live.value.get(node)
        for endpoint in registration.endpoints if registration is not None else ():
            if endpoint.listener_name == self.security.listener_name:
                return endpoint.host, endpoint.port
        raise BrokerUnreachable(f"broker {node} is not registered on {self.security.listener_name}")

    async def connect(
        self, node: int, client_id: str, frame_buffers: FrameBuffers | None = None
    ) -> KafkaConnection:
        """BrokerUnreachable (an OSError) when no logged-in connection can be made."""
        host, port = self.endpoint(node)
        try:
            connection = await KafkaConnection.connect(
                host, port, client_id, self._ssl_context, frame_buffers
            )
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__ or exc
            raise BrokerUnreachable(f"TLS handshake with broker {node} failed: {cause}") from None
        if self.security.sasl is None:
            return connection
        logged_in = LoggedInConnection(
            connection.stream, client_id, self.security.sasl, frame_buffers
        )
        try:
            await logged_in.log_in()
        except BrokerUnreachable as exc:
            raise BrokerUnreachable(f"broker {node}: {exc}") from None
        return logged_in


class LoggedInConnection(KafkaConnection):
    """A connection that logs in with SASL (KIP-152: SaslHandshake v1, then
    SaslAuthenticate until the mechanism completes) and again before its session ends."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        client_id: str,
        credentials: SaslCredentials,
        frame_buffers: FrameBuffers | None = None,
    ) -> None:
        super().__init__(stream, client_id, frame_buffers)
        self._credentials = credentials
        self._log_in_again_at: float | None = None

    async def log_in(self) -> None:
        """BrokerUnreachable, the connection closed, when the login fails."""
        try:
            authenticator = SaslAuthenticator(self._credentials, SASL_AUTHENTICATE_VERSION)
            handshake = await super().request(
                authenticator.handshake_request(), SASL_HANDSHAKE_VERSION
            )
            authenticator.on_handshake_response(handshake)
            while (body := authenticator.next_request()) is not None:
                answer = await super().request(body, SASL_AUTHENTICATE_VERSION)
                authenticator.on_authenticate_response(answer)
        except (SaslAuthenticationError, ConnectionClosed, trio.BrokenResourceError) as exc:
            await self._close()
            raise BrokerUnreachable(f"SASL login failed: {exc}") from None
        except BaseException:
            await self._close()
            raise
        self._log_in_again_at = reauthentication_due(
            trio.current_time(), authenticator.session_lifetime_ms
        )

    async def request(self, body: Any, version: int) -> Any:
        due = self._log_in_again_at
        if due is not None and trio.current_time() >= due:
            await self.log_in()
        return await super().request(body, version)

    async def _close(self) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()
