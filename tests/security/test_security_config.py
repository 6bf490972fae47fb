"""Parsing of the security settings: JAAS configs, principal mapping rules, SSL contexts."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from broker.config import BrokerConfig, ConfigError
from broker.net.channel_security import ListenerSecurity
from broker.net.endpoint import Endpoint
from broker.security.jaas import parse_jaas_config
from broker.security.principal_mapping import NoMatchingRule, SslPrincipalMapper
from broker.security.scram_credentials import ScramCredentialStore
from broker.security.ssl_context import build_server_context, subject_dn
from tests.security.helpers import PLAIN_JAAS, make_certificates, subject_of_client


def test_plain_users_come_from_the_user_options_of_the_jaas_config() -> None:
    entry = parse_jaas_config(PLAIN_JAAS)
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.plain_users() == {"admin": "admin-secret", "alice": "alice-secret"}


def test_jaas_values_may_be_unquoted_or_contain_escaped_quotes() -> None:
    entry = parse_jaas_config('M required user_a=plain user_b="say \\"hi\\"";')
    assert entry.plain_users() == {"a": "plain", "b": 'say "hi"'}


@pytest.mark.parametrize(
    "text",
    [
        'M required user_a="x"',  # no ';'
        'M sometimes user_a="x";',  # bad flag
        "M required user_a;",  # no value
        'M required a="x"; N required b="y";',  # two modules
        "",
    ],
)
def test_malformed_jaas_configs_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_jaas_config(text)


def test_default_principal_mapping_keeps_the_dn() -> None:
    assert SslPrincipalMapper("DEFAULT").name("CN=a,O=b") == "CN=a,O=b"


def test_rules_map_a_dn_and_fall_through_to_default() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT")
    assert mapper.name("CN=Kafka-Svc,OU=ServiceUsers,O=x") == "kafka-svc"
    assert mapper.name("CN=other,O=x") == "CN=other,O=x"


def test_a_dn_no_rule_matches_is_refused() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/U").name("O=x")


def test_invalid_mapping_rules_are_a_config_error() -> None:
    with pytest.raises(ConfigError):
        SslPrincipalMapper("RULE:^CN=(.*$/$1/")
    with pytest.raises(ConfigError):
        SslPrincipalMapper("NOPE")


def test_the_subject_is_written_as_java_writes_it(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path)
    der = ssl.PEM_cert_to_DER_cert(certs.client_cert.read_text())
    assert subject_dn(der) == subject_of_client()


def _config(tmp_path: Path, **extra: str) -> BrokerConfig:
    raw = {"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    raw.update({k.replace("__", "."): v for k, v in extra.items()})
    return BrokerConfig(raw)


def test_listener_prefixed_ssl_settings_override_the_broker_wide_ones(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path)
    config = BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "ssl.keystore.location": str(tmp_path / "missing.pem"),
            "listener.name.ssl.ssl.keystore.location": str(certs.server),
            "listener.name.SSL.ssl.client.auth": "required",
            "ssl.truststore.location": str(certs.ca),
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    context = build_server_context(config, "SSL")
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_inline_pem_key_store_and_trust_store_are_accepted(tmp_path: Path) -> None:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    config = BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "ssl.keystore.key": server.private_key_pem.bytes().decode(),
            "ssl.keystore.certificate.chain": server.cert_chain_pems[0].bytes().decode(),
            "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
            "ssl.client.auth": "requested",
        }
    )
    assert build_server_context(config, "SSL").verify_mode == ssl.CERT_OPTIONAL
    assert "[hidden]" in config.effective()["ssl.keystore.key"]


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({}, "ssl.keystore.location"),
        ({"ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location"),
        ({"ssl.client.auth": "required", "ssl.keystore.location": "SERVER"}, "ssl.client.auth"),
    ],
)
def test_unusable_tls_settings_stop_the_broker_naming_the_key(
    tmp_path: Path, settings: dict[str, str], key: str
) -> None:
    certs = make_certificates(tmp_path)
    raw = {"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    raw.update({k: str(certs.server) if v == "SERVER" else v for k, v in settings.items()})
    with pytest.raises(ConfigError, match=key):
        build_server_context(BrokerConfig(raw), "SSL")


def test_plain_without_a_jaas_config_stops_the_broker(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "sasl.enabled.mechanisms": "PLAIN",
        }
    )
    endpoint = Endpoint("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 0)
    with pytest.raises(ConfigError, match=r"plain\.sasl\.jaas\.config"):
        ListenerSecurity.for_endpoint(config, endpoint, ScramCredentialStore(tmp_path / "c"))


def test_unsupported_mechanisms_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"sasl\.enabled\.mechanisms"):
        BrokerConfig({"sasl.enabled.mechanisms": "GSSAPI"})


def test_mechanism_prefixed_keys_are_known_and_masked(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "5000",
        }
    )
    effective = config.effective()
    assert effective["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == "[hidden]"
    assert (
        config.get_int("listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms")
        == 5000
    )
