"""Client security properties (librdkafka's and Kafka's names) to a SecurityConfig."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.client.security_config import (
    KNOWN_PROPERTIES,
    PLAINTEXT_CONFIG,
    SaslCredentials,
    SecurityConfig,
    SecurityConfigError,
    TlsSettings,
    parse_jaas_config,
    parse_security_properties,
)

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_no_properties_mean_plaintext_without_sasl() -> None:
    assert parse_security_properties({}) == PLAINTEXT_CONFIG
    assert not PLAINTEXT_CONFIG.uses_tls and not PLAINTEXT_CONFIG.uses_sasl


def test_librdkafka_sasl_ssl_properties() -> None:
    config = parse_security_properties(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "ssl.ca.location": "/certs/ca.pem",
        }
    )
    assert config == SecurityConfig(
        protocol="SASL_SSL",
        sasl=SaslCredentials("SCRAM-SHA-512", "alice", "alice-secret"),
        tls=TlsSettings(ca_file="/certs/ca.pem"),
    )
    assert config.tls is not None and config.tls.check_hostname


def test_kafka_jaas_config_gives_the_credentials() -> None:
    config = parse_security_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": f'{SCRAM_MODULE} required username="bob" password="p;w \\"q\\"";',
        }
    )
    assert config.sasl == SaslCredentials("SCRAM-SHA-256", "bob", 'p;w "q"')
    assert config.tls is None


def test_plain_needs_the_plain_login_module() -> None:
    with pytest.raises(SecurityConfigError, match="PlainLoginModule"):
        parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{SCRAM_MODULE} required username="a" password="b";',
            }
        )


def test_librdkafkas_probe_means_the_system_cas() -> None:
    config = parse_security_properties({"security.protocol": "SSL", "ssl.ca.location": "probe"})
    assert config.tls == TlsSettings()


def test_kafka_pem_trust_and_key_stores() -> None:
    config = parse_security_properties(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE----- AAAA -----END CERTIFICATE-----",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": "CHAIN",
            "ssl.keystore.key": "KEY",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert config.tls == TlsSettings(
        ca_pem="-----BEGIN CERTIFICATE----- AAAA -----END CERTIFICATE-----",
        certificate_pem="CHAIN",
        key_pem="KEY",
        key_password="kp",
        check_hostname=False,
    )


def test_a_pem_keystore_file_holds_certificate_and_key() -> None:
    config = parse_security_properties(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/certs/client.pem",
            "ssl.truststore.location": "/certs/ca.pem",
        }
    )
    assert config.tls == TlsSettings(
        ca_file="/certs/ca.pem", certificate_file="/certs/client.pem", key_file="/certs/client.pem"
    )


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"bootstrap.servers": "x"}, "unknown property 'bootstrap.servers'"),
        ({"security.protocol": "TLS"}, "must be one of PLAINTEXT, SSL"),
        ({"security.protocol": "SASL_SSL"}, "'sasl.mechanism' must be set"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"},
            "GSSAPI' is not supported",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a"},
            "needs 'sasl.username' and 'sasl.password'",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.type": "JKS"},
            "'ssl.truststore.type=JKS' is not supported",
        ),
        ({"ssl.ca.location": "/ca.pem"}, "needs 'security.protocol' SSL or SASL_SSL"),
        ({"sasl.username": "a"}, "needs 'security.protocol' SASL_SSL or SASL_PLAINTEXT"),
        (
            {"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"},
            "needs the client key too",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": "/a", "ssl.truststore.location": "/b"},
            "give the same setting",
        ),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
            "must be https, none or empty",
        ),
        ({"ssl.keystore.password": "x"}, "PEM keys take ssl.key.password"),
    ],
)
def test_bad_properties_are_one_line_errors(properties: dict[str, str], message: str) -> None:
    with pytest.raises(SecurityConfigError) as error:
        parse_security_properties(properties)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_errors_name_the_property_with_the_callers_prefix() -> None:
    with pytest.raises(SecurityConfigError, match=r"'kafka\.sasl\.mechanism' must be set"):
        parse_security_properties({"security.protocol": "SASL_SSL"}, prefix="kafka.")


def test_the_config_pickles_for_spark_executors() -> None:
    config = parse_security_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.pem": "PEM",
        }
    )
    assert pickle.loads(pickle.dumps(config)) == config


def test_passwords_stay_out_of_reprs() -> None:
    config = parse_security_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "hunter2",
            "ssl.key.password": "keypass",
            "ssl.certificate.pem": "C",
            "ssl.key.pem": "K",
        }
    )
    assert "hunter2" not in repr(config) and "keypass" not in repr(config)


_jaas_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=30
)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@given(username=_jaas_text, password=_jaas_text)
def test_any_quoted_jaas_value_reads_back(username: str, password: str) -> None:
    text = f"{SCRAM_MODULE} required username={_quote(username)}\n password={_quote(password)};"
    assert parse_jaas_config(text) == (SCRAM_MODULE, {"username": username, "password": password})


def test_jaas_bare_values_and_flags() -> None:
    assert parse_jaas_config(f"{PLAIN_MODULE} optional username=u password=p ;") == (
        PLAIN_MODULE,
        {"username": "u", "password": "p"},
    )


@pytest.mark.parametrize(
    "text",
    [
        f'{SCRAM_MODULE} required username="a" password="b"',  # no ';'
        f'{SCRAM_MODULE} maybe username="a";',
        f"{SCRAM_MODULE} required username;",
        f'{SCRAM_MODULE} required username="a"; {PLAIN_MODULE} required;',
        "required;",
    ],
)
def test_malformed_jaas_is_refused(text: str) -> None:
    with pytest.raises(SecurityConfigError):
        parse_jaas_config(text)


_values = st.one_of(
    st.sampled_from(["SASL_SSL", "SSL", "PLAIN", "SCRAM-SHA-256", "PEM", "https", "", "x"]),
    st.text(max_size=40),
)


@given(
    properties=st.dictionaries(
        st.sampled_from([*sorted(KNOWN_PROPERTIES), "ssl.keystore.password", "foo"]),
        _values,
        max_size=8,
    )
)
def test_any_properties_give_a_config_or_one_error_line(properties: dict[str, str]) -> None:
    try:
        config = parse_security_properties(properties)
    except SecurityConfigError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert config.uses_tls == config.protocol.endswith("SSL")
        assert config.uses_sasl == config.protocol.startswith("SASL_")


@given(text=st.text(max_size=120))
def test_any_jaas_text_parses_or_is_refused_cleanly(text: str) -> None:
    try:
        module, options = parse_jaas_config(text)
    except SecurityConfigError:
        return
    assert module and all(isinstance(v, str) for v in options.values())
