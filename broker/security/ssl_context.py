"""TLS for SSL and SASL_SSL listeners: the server context and the peer's principal.

Only Kafka's PEM key stores are supported (`ssl.keystore.type=PEM`): the key and
certificate chain come from `ssl.keystore.location` (one PEM file holding both) or
inline from `ssl.keystore.key` + `ssl.keystore.certificate.chain`; trusted CAs from
`ssl.truststore.location` or `ssl.truststore.certificates`. Every key may be given
per listener as `listener.name.<l>.ssl.*`.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from cryptography import x509

from broker.config import BrokerConfig, ConfigError
from broker.security.principal_mapping import SslPrincipalMapper

_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def _load_inline_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """`load_cert_chain` reads files only: the inline PEM goes through a private temp file."""
    fd, path = tempfile.mkstemp(prefix="broker-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        Path(path).unlink(missing_ok=True)


def _why(source: str, error: OSError) -> str:
    """`<file>: <reason>` in one line: the file is what the operator must go and fix
    (an SSLError is an OSError whose strerror is None)."""
    if isinstance(error, ssl.SSLError):
        return f"{source}: not a usable PEM file ({error.reason or error})"
    return f"{source}: {error.strerror or error}"


def build_server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The listener's server-side SSLContext; ConfigError names the key that is wrong."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    settings = config.security.listener(listener)
    name, keystore_type = settings.ssl_keystore_type
    if (keystore_type or "PEM").upper() != "PEM":
        raise ConfigError(f"{name}: only PEM key stores are supported, got {keystore_type}")
    _, key_password = settings.ssl_key_password
    location_key, location = settings.ssl_keystore_location
    _, chain = settings.ssl_keystore_certificate_chain
    _, inline_key = settings.ssl_keystore_key
    try:
        if location:
            context.load_cert_chain(location, password=key_password)
        elif chain and inline_key:
            _load_inline_chain(context, chain, inline_key, key_password)
        else:
            raise ConfigError(
                f"{BrokerConfig.listener_key(listener, 'ssl.keystore.location')}: listener "
                f"{listener} uses TLS but has no key store (set ssl.keystore.location, or "
                "ssl.keystore.certificate.chain and ssl.keystore.key)"
            )
    except OSError as exc:
        source = location or "the inline ssl.keystore.key and ssl.keystore.certificate.chain"
        raise ConfigError(
            f"{location_key}: cannot load the key store {_why(source, exc)}"
        ) from None

    trust_key, trust_location = settings.ssl_truststore_location
    _, trust_inline = settings.ssl_truststore_certificates
    try:
        if trust_location:
            context.load_verify_locations(cafile=trust_location)
        elif trust_inline:
            context.load_verify_locations(cadata=trust_inline)
    except OSError as exc:
        source = trust_location or "the inline ssl.truststore.certificates"
        raise ConfigError(f"{trust_key}: cannot load the trust store {_why(source, exc)}") from None

    auth_key, client_auth = settings.ssl_client_auth
    mode = _CLIENT_AUTH.get((client_auth or "none").lower())
    if mode is None:
        raise ConfigError(f"{auth_key}: must be one of none, requested, required")
    if mode != ssl.CERT_NONE and not (trust_location or trust_inline):
        raise ConfigError(
            f"{auth_key}: client authentication needs a trust store (ssl.truststore.location "
            "or ssl.truststore.certificates)"
        )
    context.verify_mode = mode

    protocols_key, protocols = settings.ssl_enabled_protocols
    versions = sorted(_PROTOCOLS[p] for p in protocols if p in _PROTOCOLS)
    if not versions:
        raise ConfigError(f"{protocols_key}: no supported TLS protocol version enabled")
    try:
        context.minimum_version = versions[0]
        context.maximum_version = versions[-1]
    except ValueError as exc:
        raise ConfigError(f"{protocols_key}: {exc}") from None

    ciphers_key, ciphers = settings.ssl_cipher_suites
    if ciphers:
        try:
            context.set_ciphers(":".join(ciphers))
        except ssl.SSLError as exc:
            raise ConfigError(f"{ciphers_key}: no usable cipher suite: {exc}") from None
    # Kafka clients do not resume TLS sessions: tickets would cost crypto per connection
    # for nothing. Renegotiation is off (TlsServerStream never expects it).
    context.options |= ssl.OP_NO_TICKET | ssl.OP_NO_RENEGOTIATION
    context.num_tickets = 0
    return context


def principal_mapper(config: BrokerConfig, listener: str) -> SslPrincipalMapper:
    key, rules = config.security.listener(listener).ssl_principal_mapping_rules
    return SslPrincipalMapper(rules, key)


def subject_dn(der_certificate: bytes) -> str:
    """The subject as Java's X500Principal.getName() writes it (RFC 2253: last RDN
    first, `CN=client,OU=eng,O=example`), which is what Kafka's DEFAULT rule maps."""
    certificate = x509.load_der_x509_certificate(der_certificate)
    return certificate.subject.rfc4514_string()
