"""Client security settings from librdkafka / Kafka client property names.

One parser for everything a user may type: `broker client -X key=value` and
`--command-config FILE` (librdkafka's and Kafka's names), and the pipeline's
`kafka.`-prefixed Spark options (Kafka's names). The result is a frozen,
picklable value: the pipeline ships it to Spark's executors, which build their
own TLS context from it, so PEM material is kept as text or file paths, never
as an `ssl.SSLContext`.

Only what this project supports is accepted; anything else (JKS stores, GSSAPI,
OAUTHBEARER, a property we do not know) is one `SecurityConfigError` line, so a
typo never silently leaves a connection unauthenticated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SASL_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)

# The JAAS login module Kafka pairs with each mechanism.
_LOGIN_MODULES = {
    PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")

# Every property name this parser understands; librdkafka's and Kafka's spellings.
KNOWN_PROPERTIES = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.jaas.config",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
    }
)
# Names a user might reasonably try that we recognise but cannot honour, with the reason.
_UNSUPPORTED = {
    "ssl.keystore.password": "PEM keys take ssl.key.password",
    "ssl.truststore.password": "PEM trust stores have no password",
    "sasl.kerberos.service.name": "GSSAPI is not supported",
    "sasl.oauthbearer.config": "OAUTHBEARER is not supported",
    "sasl.login.callback.handler.class": "Java classes cannot be loaded here",
    "sasl.client.callback.handler.class": "Java classes cannot be loaded here",
}


class SecurityConfigError(ValueError):
    """A security property that is unknown, unsupported, missing or malformed (one line)."""


@attrs.frozen
class SaslCredentials:
    mechanism: str
    username: str
    password: str = attrs.field(repr=False)


@attrs.frozen
class TlsSettings:
    """Where the trust anchors and the optional client certificate come from.

    Each of the PEM pairs is either a file path or the PEM text itself (Kafka's
    `ssl.truststore.certificates`, `ssl.keystore.certificate.chain`); with
    neither trust setting the system's default CAs are used, as librdkafka does.
    """

    ca_file: str | None = None
    ca_pem: str | None = None
    certificate_file: str | None = None
    certificate_pem: str | None = None
    key_file: str | None = None
    key_pem: str | None = attrs.field(default=None, repr=False)
    key_password: str | None = attrs.field(default=None, repr=False)
    check_hostname: bool = True
    verify_certificates: bool = True

    @property
    def has_client_certificate(self) -> bool:
        return bool(self.certificate_file or self.certificate_pem)


@attrs.frozen
class SecurityConfig:
    protocol: str = PLAINTEXT
    sasl: SaslCredentials | None = None
    tls: TlsSettings | None = None

    @property
    def uses_tls(self) -> bool:
        return self.tls is not None

    @property
    def uses_sasl(self) -> bool:
        return self.sasl is not None


PLAINTEXT_CONFIG = SecurityConfig()


def is_security_property(name: str) -> bool:
    """Whether a property belongs to this parser (the pipeline passes others on)."""
    return (
        name in KNOWN_PROPERTIES
        or name in _UNSUPPORTED
        or name.startswith(("security.", "sasl.", "ssl."))
    )


def parse_security_properties(properties: Mapping[str, str], prefix: str = "") -> SecurityConfig:
    """A SecurityConfig from property names (each written with ``prefix`` in errors)."""
    props = {key.strip(): value.strip() for key, value in properties.items()}
    for key in props:
        if key in _UNSUPPORTED:
            raise SecurityConfigError(
                f"property '{prefix}{key}' is not supported: {_UNSUPPORTED[key]}"
            )
        if key not in KNOWN_PROPERTIES:
            raise SecurityConfigError(f"unknown property '{prefix}{key}'")

    def get(key: str) -> str | None:
        value = props.get(key)
        return value if value else None

    protocol = (get("security.protocol") or PLAINTEXT).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(
            f"'{prefix}security.protocol' must be one of {', '.join(SECURITY_PROTOCOLS)},"
            f" got {props['security.protocol']!r}"
        )
    sasl = _sasl(props, get, prefix) if protocol.startswith("SASL_") else None
    if sasl is None:
        given = [k for k in props if k.startswith("sasl.") and props[k]]
        if given:
            raise SecurityConfigError(
                f"'{prefix}{given[0]}' needs '{prefix}security.protocol' SASL_SSL or"
                f" SASL_PLAINTEXT (it is {protocol})"
            )
    tls = _tls(props, get, prefix) if protocol.endswith("SSL") else None
    if tls is None:
        given = [k for k in props if k.startswith("ssl.") and props[k]]
        given += [k for k in props if k == "enable.ssl.certificate.verification"]
        if given:
            raise SecurityConfigError(
                f"'{prefix}{given[0]}' needs '{prefix}security.protocol' SSL or SASL_SSL"
                f" (it is {protocol})"
            )
    return SecurityConfig(protocol=protocol, sasl=sasl, tls=tls)


_Getter = Callable[[str], "str | None"]


def _sasl(props: Mapping[str, str], get: _Getter, prefix: str) -> SaslCredentials:
    mechanisms = [m for m in (get("sasl.mechanism"), get("sasl.mechanisms")) if m]
    if len(set(mechanisms)) > 1:
        raise SecurityConfigError(
            f"'{prefix}sasl.mechanism' and '{prefix}sasl.mechanisms' disagree: "
            f"{mechanisms[0]} and {mechanisms[1]}"
        )
    if not mechanisms:
        raise SecurityConfigError(
            f"'{prefix}sasl.mechanism' must be set: {', '.join(SASL_MECHANISMS)}"
        )
    mechanism = mechanisms[0].upper()
    if mechanism not in SASL_MECHANISMS:
        raise SecurityConfigError(
            f"SASL mechanism {mechanisms[0]!r} is not supported: use one of"
            f" {', '.join(SASL_MECHANISMS)}"
        )
    jaas = get("sasl.jaas.config")
    username, password = get("sasl.username"), props.get("sasl.password")
    if jaas is not None:
        if username is not None or password is not None:
            raise SecurityConfigError(
                f"give either '{prefix}sasl.jaas.config' or '{prefix}sasl.username' and"
                f" '{prefix}sasl.password', not both"
            )
        module, options = parse_jaas_config(jaas)
        if module != _LOGIN_MODULES[mechanism]:
            raise SecurityConfigError(
                f"'{prefix}sasl.jaas.config' names {module}; {mechanism} needs"
                f" {_LOGIN_MODULES[mechanism]}"
            )
        username, password = options.get("username"), options.get("password")
        what = f"'{prefix}sasl.jaas.config'"
        if username is None or password is None:
            raise SecurityConfigError(f'{what} must give username="..." and password="..."')
    elif username is None or password is None:
        raise SecurityConfigError(
            f"{mechanism} needs '{prefix}sasl.username' and '{prefix}sasl.password'"
            f" (or '{prefix}sasl.jaas.config')"
        )
    return SaslCredentials(mechanism=mechanism, username=username, password=password)


def _tls(props: Mapping[str, str], get: _Getter, prefix: str) -> TlsSettings:
    for store in ("truststore", "keystore"):
        kind = get(f"ssl.{store}.type")
        if kind is not None and kind.upper() != "PEM":
            raise SecurityConfigError(
                f"'{prefix}ssl.{store}.type={kind}' is not supported: only PEM"
                " (convert a JKS or PKCS12 store with keytool and openssl)"
            )
    trust = _one_of(
        get,
        prefix,
        "ssl.ca.location",
        "ssl.truststore.location",
        "ssl.ca.pem",
        "ssl.truststore.certificates",
    )
    certificate = _one_of(
        get,
        prefix,
        "ssl.certificate.location",
        "ssl.keystore.location",
        "ssl.certificate.pem",
        "ssl.keystore.certificate.chain",
    )
    key = _one_of(get, prefix, "ssl.key.location", "ssl.key.pem", "ssl.keystore.key")
    if certificate == "ssl.keystore.location":
        # Kafka's PEM key store file holds the private key and the certificate chain.
        if key is not None:
            raise SecurityConfigError(
                f"'{prefix}ssl.keystore.location' holds the key: drop '{prefix}{key}'"
            )
        key = certificate
    if (certificate is None) != (key is None):
        given, missing = (certificate, "key") if key is None else (key, "certificate")
        raise SecurityConfigError(f"'{prefix}{given}' needs the client {missing} too")
    identification = props.get("ssl.endpoint.identification.algorithm", "https").lower()
    if identification not in ("https", "", "none"):
        raise SecurityConfigError(
            f"'{prefix}ssl.endpoint.identification.algorithm' must be https, none or empty,"
            f" got {identification!r}"
        )
    verify = props.get("enable.ssl.certificate.verification", "true").lower()
    if verify not in ("true", "false"):
        raise SecurityConfigError(
            f"'{prefix}enable.ssl.certificate.verification' must be true or false, got {verify!r}"
        )

    if trust == "ssl.ca.location" and get(trust) == "probe":
        trust = None  # librdkafka's "probe": the system's CAs, the default here anyway

    def file(name: str | None) -> str | None:
        return get(name) if name is not None and name.endswith("location") else None

    def pem(name: str | None) -> str | None:
        return get(name) if name is not None and not name.endswith("location") else None

    return TlsSettings(
        ca_file=file(trust),
        ca_pem=pem(trust),
        certificate_file=file(certificate),
        certificate_pem=pem(certificate),
        key_file=file(key),
        key_pem=pem(key),
        key_password=props.get("ssl.key.password") or None,
        check_hostname=identification == "https" and verify == "true",
        verify_certificates=verify == "true",
    )


def _one_of(get: _Getter, prefix: str, *names: str) -> str | None:
    """The one property of ``names`` that is set (alternative spellings of one setting)."""
    given = [name for name in names if get(name) is not None]
    if len(given) > 1:
        raise SecurityConfigError(
            f"'{prefix}{given[0]}' and '{prefix}{given[1]}' give the same setting: keep one"
        )
    return given[0] if given else None


# ------------------------------------------------------------------ JAAS


_JAAS_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))'
)


def parse_jaas_config(text: str) -> tuple[str, dict[str, str]]:
    """Kafka's `sasl.jaas.config`: one login module, a control flag, options, a semicolon.

    ``org.apache.kafka.common.security.scram.ScramLoginModule required
    username="alice" password="alice-secret";`` gives the module name and its options.
    Quoted values may hold any character, with backslash escaping the next one.
    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise SecurityConfigError(f"sasl.jaas.config: cannot parse at {text[pos : pos + 20]!r}")
        pos = match.end()
        if match.group("quoted") is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match.group("quoted")[1:-1])))
        elif match.group("word") is not None:
            tokens.append(("word", match.group("word")))
        elif match.group("punct") is not None:
            tokens.append((match.group("punct"), match.group("punct")))
        if text[pos:].strip() == "":
            break
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise SecurityConfigError(
            'sasl.jaas.config must read: LoginModule required key="value" ...;'
        )
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in _JAAS_FLAGS:
        raise SecurityConfigError(
            f"sasl.jaas.config: control flag {flag!r} is not one of {', '.join(_JAAS_FLAGS)}"
        )
    options: dict[str, str] = {}
    rest = tokens[2:]
    while rest and rest[0][0] != ";":
        if len(rest) < 3 or rest[0][0] != "word" or rest[1][0] != "=" or rest[2][0] == ";":
            raise SecurityConfigError('sasl.jaas.config: options must be key="value" pairs')
        options[rest[0][1]] = rest[2][1]
        rest = rest[3:]
    if not rest:
        raise SecurityConfigError("sasl.jaas.config must end with ';'")
    if rest[1:]:
        raise SecurityConfigError("sasl.jaas.config must name exactly one login module")
    return module, options
