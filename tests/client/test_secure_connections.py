"""The Trio client (ClientSession) and the pipeline's blocking client over TLS and SASL.

Against a stand-in broker (tests/client/fake_secure_broker.py) on a real TLS socket;
tests/integration/test_security_end_to_end.py runs the same paths against the broker.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import trio

from broker.client.cli import main
from broker.client.sasl_client import scram_credential
from broker.client.security_config import SecurityConfig, parse_security_properties
from broker.client.session import ClientError, ClientSession
from broker.pipeline.kafka_client import KafkaClient, KafkaClientError
from broker.protocol.messages import MetadataRequest
from tests.client.fake_secure_broker import CLUSTER_ID, Certificates, fake_secure_broker

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SALT = b"fixed-test-salt-16b"


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    return Certificates.make(tmp_path)


def scram_user(
    mechanism: str, user: str, password: str
) -> dict[tuple[str, str], tuple[bytes, bytes, int]]:
    credential = scram_credential(mechanism, password, 4096, SALT)
    return {(mechanism, user): (SALT, credential.salted_password, 4096)}


async def cluster_id(bootstrap: str, security: SecurityConfig) -> str | None:
    async with await ClientSession.open(bootstrap, security=security) as session:
        response = await session.call(MetadataRequest(topics=()))
        cluster: str | None = response.cluster_id
        return cluster


async def test_ssl_with_a_ca_file_checks_the_broker_and_talks_kafka(certs: Certificates) -> None:
    async with fake_secure_broker(certs, sasl=False) as broker:
        security = parse_security_properties(
            {"security.protocol": "SSL", "ssl.ca.location": certs.ca_file}
        )
        assert await cluster_id(f"127.0.0.1:{broker.port}", security) == CLUSTER_ID
        assert await cluster_id(f"localhost:{broker.port}", security) == CLUSTER_ID


async def test_sasl_ssl_scram_with_a_kafka_jaas_config_logs_in(certs: Certificates) -> None:
    users = scram_user("SCRAM-SHA-512", "alice", "alice-secret")
    async with fake_secure_broker(certs, scram_users=users) as broker:
        security = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": f'{SCRAM_MODULE} required username="alice" password="alice-secret";',
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": certs.ca_file,
            }
        )
        assert await cluster_id(f"127.0.0.1:{broker.port}", security) == CLUSTER_ID
        assert broker.authenticated == ["alice"]


async def test_a_wrong_password_is_one_client_error_line(certs: Certificates) -> None:
    users = scram_user("SCRAM-SHA-256", "alice", "alice-secret")
    async with fake_secure_broker(certs, scram_users=users) as broker:
        security = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": "not-her-secret",
                "ssl.ca.location": certs.ca_file,
            }
        )
        with pytest.raises(ClientError, match="as 'alice' with SCRAM-SHA-256 failed: Auth"):
            await cluster_id(f"127.0.0.1:{broker.port}", security)
        assert broker.authenticated == []


async def test_a_mechanism_the_broker_lacks_names_those_it_has(certs: Certificates) -> None:
    async with fake_secure_broker(certs, plain_users={"u": "p"}) as broker:
        security = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "u",
                "sasl.password": "p",
                "ssl.ca.location": certs.ca_file,
            }
        )
        with pytest.raises(
            ClientError, match=r"does not enable .*SCRAM-SHA-512 \(it offers PLAIN\)"
        ):
            await cluster_id(f"127.0.0.1:{broker.port}", security)


async def test_an_untrusted_broker_certificate_fails_the_handshake(
    certs: Certificates, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    other = Certificates.make(tmp_path / "other")
    async with fake_secure_broker(certs, sasl=False) as broker:
        security = parse_security_properties(
            {"security.protocol": "SSL", "ssl.ca.location": other.ca_file}
        )
        with pytest.raises(
            ClientError, match=r"TLS handshake with 127\.0\.0\.1:\d+ failed: certificate verify"
        ):
            await cluster_id(f"127.0.0.1:{broker.port}", security)


async def test_the_host_name_is_checked_unless_identification_is_off(tmp_path: Path) -> None:
    certs = Certificates.make(tmp_path, "broker.example")
    async with fake_secure_broker(certs, sasl=False) as broker:
        checked = {"security.protocol": "SSL", "ssl.ca.location": certs.ca_file}
        with pytest.raises(ClientError, match="mismatch"):
            await cluster_id(f"127.0.0.1:{broker.port}", parse_security_properties(checked))
        unchecked = {**checked, "ssl.endpoint.identification.algorithm": ""}
        security = parse_security_properties(unchecked)
        assert await cluster_id(f"127.0.0.1:{broker.port}", security) == CLUSTER_ID


async def test_mutual_tls_with_kafka_pem_strings_without_line_breaks(certs: Certificates) -> None:
    """A properties file's continuation lines join PEM into one line; Kafka reads it anyway."""
    chain = certs.client.cert_chain_pems[0].bytes().decode().replace("\n", " ")
    key = certs.client.private_key_pem.bytes().decode().replace("\n", "")
    async with fake_secure_broker(certs, sasl=False, require_client_certificate=True) as broker:
        security = parse_security_properties(
            {
                "security.protocol": "SSL",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.certificates": certs.ca.cert_pem.bytes().decode(),
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": chain,
                "ssl.keystore.key": key,
            }
        )
        assert await cluster_id(f"127.0.0.1:{broker.port}", security) == CLUSTER_ID
        subjects = [dict(rdn[0] for rdn in c["subject"]) for c in broker.client_certificates]
        assert [s["commonName"] for s in subjects] == ["client-one"]


async def test_plaintext_config_against_a_tls_listener_is_one_error(certs: Certificates) -> None:
    async with fake_secure_broker(certs, sasl=False) as broker:
        with pytest.raises(ClientError, match=r"ApiVersions v3: the broker closed the connection"):
            async with await ClientSession.open(f"127.0.0.1:{broker.port}", timeout_s=5):
                pass


async def test_the_cli_reads_command_config_and_x_overrides(
    certs: Certificates, tmp_path: Path
) -> None:
    async with fake_secure_broker(certs, plain_users={"bob": "bob-secret"}) as broker:
        config = tmp_path / "client.properties"
        config.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=PLAIN\n"
            "sasl.username=bob\n"
            "sasl.password=wrong\n"
            f"ssl.ca.location={certs.ca_file}\n"
        )
        argv = [
            "--command-config",
            str(config),
            "metadata",
            "-X",
            "sasl.password=bob-secret",
            "-b",
            f"127.0.0.1:{broker.port}",
            "--json",
        ]
        code, out, err = await trio.to_thread.run_sync(_run_cli, argv)
        assert code == 0, err
        assert CLUSTER_ID in out and broker.authenticated == ["bob"]
        code, out, err = await trio.to_thread.run_sync(_run_cli, argv[:3] + argv[5:])
        assert code == 1 and err.startswith("error: authentication as 'bob' with PLAIN failed")


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


async def test_the_pipeline_client_connects_over_sasl_ssl(certs: Certificates) -> None:
    users = scram_user("SCRAM-SHA-256", "spark", "spark-secret")
    async with fake_secure_broker(certs, scram_users=users) as broker:
        good = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{SCRAM_MODULE} required username="spark" password="spark-secret";',
                "ssl.truststore.certificates": certs.ca.cert_pem.bytes().decode(),
            }
        )

        def list_topics(security: SecurityConfig) -> dict[str, int]:
            with KafkaClient.connect(f"127.0.0.1:{broker.port}", security=security) as client:
                return client.partitions_for(None)

        assert await trio.to_thread.run_sync(list_topics, good) == {}
        assert broker.authenticated == ["spark"]
        bad = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "spark",
                "sasl.password": "nope",
                "ssl.truststore.certificates": certs.ca.cert_pem.bytes().decode(),
            }
        )
        with pytest.raises(KafkaClientError, match="SASL_AUTHENTICATION_FAILED"):
            await trio.to_thread.run_sync(list_topics, bad)
