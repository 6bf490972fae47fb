"""`broker client` and the pipeline's Kafka client against the broker's TLS and SASL
listeners, as a user runs them: SCRAM users made with `users scram set` on the
PLAINTEXT listener, then produce/consume over SASL_SSL and SSL."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from broker.client.security_config import parse_security_properties
from broker.client.session import ClientSession
from broker.pipeline.kafka_client import KafkaClient, KafkaClientError
from broker.protocol.messages import MetadataRequest
from broker.protocol.records import Record, encode_batch, iter_batches, iter_records
from broker.server import KafkaServer
from tests.client.cli_runner import run_cli
from tests.integration.broker_harness import running_broker
from tests.security.helpers import (
    PLAIN_JAAS,
    Certificates,
    make_certificates,
    ssl_listener_settings,
)

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0"
PROTOCOLS = "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,MTLS:SSL"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


class Cli:
    """`broker client` in-process (in a worker thread, with its own Trio run)."""

    def __init__(self, server: KafkaServer, certs: Certificates) -> None:
        self.server = server
        self.certs = certs

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.server.bound_port(listener)}"

    def scram(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> list[str]:
        return [
            "-b",
            self.bootstrap("SASL_SSL"),
            "-X",
            "security.protocol=SASL_SSL",
            "-X",
            f"sasl.mechanism={mechanism}",
            "-X",
            f"sasl.username={user}",
            "-X",
            f"sasl.password={password}",
            "-X",
            f"ssl.ca.location={self.certs.ca}",
        ]

    async def run(self, *argv: str, stdin: bytes = b"") -> tuple[int, bytes, str]:
        result = await trio.to_thread.run_sync(run_cli, list(argv), stdin)
        return result.code, result.out, result.err

    async def ok(self, *argv: str, stdin: bytes = b"") -> bytes:
        code, out, err = await self.run(*argv, stdin=stdin)
        assert code == 0, err
        return out


@asynccontextmanager
async def secured(tmp_path: Path, certs: Certificates) -> AsyncIterator[Cli]:
    overrides = {
        "listeners": LISTENERS,
        "listener.security.protocol.map": PROTOCOLS,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "0",
        "metrics.port": "-1",
        **ssl_listener_settings("SASL_SSL", certs),
        **ssl_listener_settings("SSL", certs),
        **ssl_listener_settings("MTLS", certs, "required"),
    }
    async with running_broker(tmp_path / "data", overrides) as server:
        yield Cli(server, certs)


async def test_a_user_set_with_the_client_logs_in_with_scram_and_a_deleted_one_cannot(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secured(tmp_path, certs) as cli:
        internal = ["-b", cli.bootstrap("PLAINTEXT")]
        await cli.ok("users", "scram", "set", "alice", "--password", "alice-secret", *internal)
        await cli.ok(
            "users",
            "scram",
            "set",
            "alice",
            *internal,
            "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=alice-512]",
        )
        described = json.loads(
            await cli.ok("users", "scram", "describe", "alice", "--json", *internal)
        )
        assert described == [
            {
                "user": "alice",
                "credentials": [
                    {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
                    {"mechanism": "SCRAM-SHA-512", "iterations": 8192},
                ],
            }
        ]
        out = await cli.ok("metadata", "--json", *cli.scram("alice", "alice-secret"))
        assert json.loads(out)["brokers"]
        await cli.ok("api-versions", *cli.scram("alice", "alice-512", "SCRAM-SHA-512"))
        # The stored credential is Kafka's: librdkafka's own SCRAM client logs in with it.
        kcat_properties = [
            "security.protocol=SASL_SSL",
            "sasl.mechanisms=SCRAM-SHA-512",
            "sasl.username=alice",
            "sasl.password=alice-512",
            f"ssl.ca.location={certs.ca}",
        ]
        kcat = await trio.run_process(
            ["kcat", "-L", "-J", "-m", "20", "-b", cli.bootstrap("SASL_SSL")]
            + [arg for prop in kcat_properties for arg in ("-X", prop)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert kcat.returncode == 0, kcat.stderr
        assert json.loads(kcat.stdout)["brokers"]

        code, _, err = await cli.run("metadata", *cli.scram("alice", "wrong"))
        assert code == 1
        assert err.startswith("error: authentication as 'alice' with SCRAM-SHA-256 failed")
        assert err.count("\n") == 1

        await cli.ok("users", "scram", "delete", "alice", "--mechanism", "SCRAM-SHA-256", *internal)
        code, _, err = await cli.run("metadata", *cli.scram("alice", "alice-secret"))
        assert code == 1 and "failed" in err
        await cli.ok("api-versions", *cli.scram("alice", "alice-512", "SCRAM-SHA-512"))


async def test_records_round_trip_over_sasl_ssl_scram_with_a_command_config(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secured(tmp_path, certs) as cli:
        internal = ["-b", cli.bootstrap("PLAINTEXT")]
        await cli.ok("users", "scram", "set", "bob", "--password", "bob-secret", *internal)
        config = tmp_path / "client.properties"
        config.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-256\n"
            f'sasl.jaas.config={SCRAM_MODULE} required \\\n    username="bob" password="bob-secret";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={certs.ca}\n"
        )
        secure = ["--command-config", str(config), "-b", cli.bootstrap("SASL_SSL")]
        await cli.ok("topics", "create", "secured", "--partitions", "2", *secure)
        lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(20))
        await cli.ok("produce", "secured", "-K", ":", *secure, stdin=lines)
        out = await cli.ok(
            "consume", "secured", "--from-beginning", "-e", "-f", "%k:%s\\n", *secure
        )
        assert sorted(out.splitlines()) == sorted(lines.splitlines())
        out = await cli.ok(
            "consume", "secured", "-g", "readers", "--from-beginning", "-e", "-f", "%s\\n", *secure
        )
        assert len(out.splitlines()) == 20


async def test_records_round_trip_over_ssl_and_mutual_tls(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secured(tmp_path, certs) as cli:
        ssl_args = ["-b", cli.bootstrap("SSL"), "-X", "security.protocol=SSL"]
        ssl_args += ["-X", f"ssl.ca.location={certs.ca}"]
        await cli.ok("produce", "tls-topic", *ssl_args, stdin=b"one\ntwo\n")
        out = await cli.ok("consume", "tls-topic", "--from-beginning", "-e", *ssl_args)
        assert out.splitlines() == [b"one", b"two"]

        mtls = ["-b", cli.bootstrap("MTLS"), "-X", "security.protocol=SSL"]
        mtls += ["-X", f"ssl.ca.location={certs.ca}"]
        code, _, err = await cli.run("metadata", *mtls)
        assert code == 1 and err.startswith("error: ")
        mtls += ["-X", f"ssl.certificate.location={certs.client_cert}"]
        mtls += ["-X", f"ssl.key.location={certs.client_key}"]
        out = await cli.ok("consume", "tls-topic", "--from-beginning", "-e", *mtls)
        assert out.splitlines() == [b"one", b"two"]

        code, _, err = await cli.run(
            "metadata",
            "-b",
            cli.bootstrap("SSL"),
            "-X",
            "security.protocol=SSL",
            "-X",
            f"ssl.ca.location={certs.other_ca}",
        )
        assert code == 1 and "certificate verify failed" in err


async def test_the_pipeline_client_produces_and_fetches_over_sasl_ssl(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secured(tmp_path, certs) as cli:
        internal = ["-b", cli.bootstrap("PLAINTEXT")]
        await cli.ok(
            "users",
            "scram",
            "set",
            "spark",
            "--mechanism",
            "SCRAM-SHA-512",
            "--password",
            "spark-secret",
            *internal,
        )
        await cli.ok("topics", "create", "pipe", *internal)
        security = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": f'{SCRAM_MODULE} required username="spark" password="spark-secret";',
                "ssl.truststore.type": "PEM",
                "ssl.truststore.certificates": certs.ca.read_text(),
            }
        )
        bootstrap = cli.bootstrap("SASL_SSL")

        def produce_and_fetch() -> list[bytes | None]:
            with KafkaClient.connect(bootstrap, security=security) as client:
                batch = encode_batch([Record(i, 0, None, b"v%d" % i) for i in range(3)])
                client.produce({("pipe", 0): batch})
                fetched = client.fetch("pipe", 0, 0, max_wait_ms=0)
            return [
                record.value
                for header, batch_view in iter_batches(fetched.records, allow_partial_tail=True)
                for record in iter_records(batch_view, header)
            ]

        assert await trio.to_thread.run_sync(produce_and_fetch) == [b"v0", b"v1", b"v2"]

        wrong = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "spark",
                "sasl.password": "guess",
                "ssl.ca.location": str(certs.ca),
            }
        )

        def connect_wrong() -> None:
            with KafkaClient.connect(bootstrap, security=wrong):
                pass

        with pytest.raises(KafkaClientError, match="SASL_AUTHENTICATION_FAILED"):
            await trio.to_thread.run_sync(connect_wrong)


async def test_a_client_missing_the_listeners_security_is_told_what_to_set(
    tmp_path: Path, certs: Certificates
) -> None:
    async with secured(tmp_path, certs) as cli:
        sasl_ssl = ["-b", cli.bootstrap("SASL_SSL")]
        code, _, err = await cli.run("metadata", *sasl_ssl)
        assert code == 1 and "(a TLS listener? set -X security.protocol=SSL or SASL_SSL)" in err
        tls_only = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs.ca}"]
        code, _, err = await cli.run("metadata", *sasl_ssl, *tls_only)
        assert code == 1 and "(a SASL listener? set -X security.protocol=SASL_SSL" in err
        plaintext = cli.scram("alice", "pw")
        plaintext[1] = cli.bootstrap("PLAINTEXT")
        code, _, err = await cli.run("metadata", *plaintext)
        assert code == 1 and "TLS handshake with" in err and "is the listener SSL" in err


def _reauthentications(server: KafkaServer) -> float:
    total = 0.0
    for processor in server.socket_server.processors["SASL_SSL"]:
        for event, meter in processor.auth_metrics.meters.items():
            if event.value == "successful-reauthentication":
                total += getattr(meter, "count", 0)
    return total


async def test_clients_log_in_again_before_the_session_lifetime_runs_out(
    tmp_path: Path, certs: Certificates
) -> None:
    """KIP-368: with connections.max.reauth.ms the broker closes a connection used past its
    session; both clients re-authenticate on the same connection first."""
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "connections.max.reauth.ms": "600",
        "metrics.port": "-1",
        **ssl_listener_settings("SASL_SSL", certs),
    }
    async with running_broker(tmp_path / "data", overrides) as server:
        cli = Cli(server, certs)
        await cli.ok(
            "users", "scram", "set", "eve", "--password", "eve-pw", "-b", cli.bootstrap("PLAINTEXT")
        )
        security = parse_security_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "eve",
                "sasl.password": "eve-pw",
                "ssl.ca.location": str(certs.ca),
            }
        )
        bootstrap = cli.bootstrap("SASL_SSL")
        async with await ClientSession.open(bootstrap, security=security) as session:
            for _ in range(3):
                response = await session.call(MetadataRequest(topics=()))
                assert response.brokers
                await trio.sleep(0.7)
        assert _reauthentications(server) >= 2

        def pipeline_client_reads_across_sessions() -> int:
            with KafkaClient.connect(bootstrap, security=security) as client:
                for _ in range(3):
                    client.partitions_for(None)
                    time.sleep(0.7)
                return len(client.partitions_for(None))

        before = _reauthentications(server)
        assert await trio.to_thread.run_sync(pipeline_client_reads_across_sessions) >= 0
        assert _reauthentications(server) >= before + 2
