"""The trio-kafka source over SASL_SSL (SCRAM), with Spark's Kafka option names."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from broker.client.cli import main as client_main
from broker.client.security_config import SaslCredentials, TlsSettings
from broker.pipeline import jobs
from broker.pipeline.options import OptionError, SinkOptions, SourceOptions, security_options
from tests.integration.broker_harness import (
    BrokerProcess,
    env_without_proxies,
    start_broker_process,
    stop_broker_process,
)
from tests.pipeline.conftest import create_topic, produce
from tests.pipeline.test_cli_errors import _one_error_line
from tests.security.helpers import Certificates, make_certificates, ssl_listener_settings

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: Certificates
) -> Iterator[BrokerProcess]:
    """PLAINTEXT first (the harness's `bootstrap`, for set-up), SASL_SSL for Spark."""
    data_dir = tmp_path_factory.mktemp("secured-broker") / "data"
    process = start_broker_process(
        data_dir,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            **ssl_listener_settings("SASL_SSL", certs),
        },
    )
    try:
        yield process
    finally:
        stop_broker_process(process)


def test_the_source_reads_over_sasl_ssl_with_spark_kafka_options(
    spark: Any, secured_broker: BrokerProcess, certs: Certificates, tmp_path: Path
) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        internal = ["-b", secured_broker.bootstrap]  # the PLAINTEXT listener
        code = client_main(
            ["users", "scram", "set", "spark", "--password", "spark-secret", *internal]
        )
    assert code == 0, err.getvalue()
    create_topic(secured_broker, "secured-events", 2)
    produce(secured_broker, "secured-events", 0, [b"a%d" % i for i in range(30)])
    produce(secured_broker, "secured-events", 1, [b"b%d" % i for i in range(12)])

    query = jobs.start_archive(
        spark,
        bootstrap=f"127.0.0.1:{secured_broker.ports['SASL_SSL']}",
        subscribe="secured-events",
        output=str(tmp_path / "out"),
        checkpoint=str(tmp_path / "checkpoint"),
        available_now=True,
        options={
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": (
                f'{SCRAM_MODULE} required username="spark" password="spark-secret";'
            ),
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.certificates": certs.ca.read_text(),
        },
    )
    assert query.awaitTermination(90), "archive query did not finish"
    assert query.exception() is None

    rows = ds.dataset(str(tmp_path / "out"), format="parquet", partitioning="hive").to_table()
    values = sorted(row["value"] for row in rows.to_pylist())
    assert values == sorted([b"a%d" % i for i in range(30)] + [b"b%d" % i for i in range(12)])


def _pipeline_archive(
    bootstrap: str, tmp_path: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    args = ["archive", "--bootstrap-servers", bootstrap, "--subscribe", "secured-events"]
    args += ["--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp")]
    for option in options:
        args += ["--option", option]
    return subprocess.run(
        [sys.executable, "-m", "broker", "pipeline", *args],
        env=env_without_proxies(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cli_preflight_logs_in_with_the_kafka_options_and_reports_failures_in_a_line(
    secured_broker: BrokerProcess, certs: Certificates, tmp_path: Path
) -> None:
    """Wrong password, missing topic or bad option: one line before Spark starts."""
    bootstrap = f"127.0.0.1:{secured_broker.ports['SASL_SSL']}"
    options = [
        "kafka.security.protocol=SASL_SSL",
        "kafka.sasl.mechanism=SCRAM-SHA-256",
        f"kafka.ssl.truststore.location={certs.ca}",
    ]
    jaas = f'kafka.sasl.jaas.config={SCRAM_MODULE} required username="spark" password="%s";'
    result = _pipeline_archive(bootstrap, tmp_path, *options, jaas % "wrong")
    assert result.returncode == 2
    assert "authentication as 'spark' with SCRAM-SHA-256 failed" in _one_error_line(result)

    result = _pipeline_archive(bootstrap, tmp_path, *options[:2], jaas % "spark-secret")
    assert "certificate verify failed" in _one_error_line(result)

    result = _pipeline_archive(bootstrap, tmp_path, *options, "kafka.sasl.mechanism=GSSAPI")
    assert "'GSSAPI' is not supported" in _one_error_line(result)


def test_security_options_parse_as_spark_hands_them_over() -> None:
    """Lower-cased keys; the sink takes the same options; others under kafka. pass through."""
    raw = {
        "kafka.bootstrap.servers": "h:1",
        "subscribe": "t",
        "kafka.security.protocol": "sasl_ssl",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="p";',
        "kafka.max.request.size": "1048576",
    }
    source = SourceOptions.parse(raw, streaming=True)
    sink = SinkOptions.parse(raw)
    assert source.security == sink.security
    assert source.security.sasl == SaslCredentials("PLAIN", "u", "p")
    assert source.security.tls == TlsSettings()
    assert set(security_options(raw)) == {
        "kafka.security.protocol",
        "kafka.sasl.mechanism",
        "kafka.sasl.jaas.config",
    }
    with pytest.raises(OptionError, match=r"unknown property 'kafka\.ssl\.cafile'"):
        SourceOptions.parse({**raw, "kafka.ssl.cafile": "x"}, streaming=True)
    plain = SourceOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}, streaming=True
    )
    assert not plain.security.uses_tls and not plain.security.uses_sasl


def test_the_sink_writes_over_sasl_ssl_with_the_same_options(
    secured_broker: BrokerProcess, certs: Certificates
) -> None:
    """A task's write (as Spark calls it) and its replay protection, logged in with SCRAM."""
    import pyarrow as pa

    from broker.pipeline.sink import write_batches
    from tests.pipeline.conftest import read_topic

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        internal = ["-b", secured_broker.bootstrap]
        user = ["writer", "--password", "writer-secret"]
        assert client_main(["users", "scram", "set", *user, *internal]) == 0, err.getvalue()
        assert client_main(["topics", "create", "secured-out", *internal]) == 0, err.getvalue()
    options = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": f"127.0.0.1:{secured_broker.ports['SASL_SSL']}",
            "topic": "secured-out",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": (
                f'{SCRAM_MODULE} required username="writer" password="writer-secret";'
            ),
            "kafka.ssl.truststore.location": str(certs.ca),
        }
    )
    rows = pa.record_batch({"value": [b"x", b"y", b"z"]})
    first = write_batches(options, iter([rows]), query_id="q-secured", batch_id=0)
    replay = write_batches(options, iter([rows]), query_id="q-secured", batch_id=0)
    assert (first.records, first.skipped) == (3, False)
    assert replay.skipped
    assert [record.value for _, record in read_topic(secured_broker, "secured-out")] == [
        b"x",
        b"y",
        b"z",
    ]
