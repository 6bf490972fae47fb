"""Real clients on TLS and SASL listeners of `broker serve`: confluent-kafka (SASL_SSL
SCRAM-SHA-512, SSL with mTLS), kafka-python (SASL_PLAINTEXT PLAIN, SSL), aiokafka
(SCRAM-SHA-256) and kcat (SASL_SSL SCRAM-SHA-256), each producing and consuming.

SCRAM users are created as an operator would, with AlterUserScramCredentials on the
broker's PLAINTEXT listener; certificates are made for the test run.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as RdPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.client.connection import KafkaConnection
from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)
from tests.interop.kafka_clients import (
    INTEROP_BROKER_SETTINGS,
    Message,
    assert_same_per_partition,
    confluent_consume,
    confluent_produce,
    consumer_settings,
    create_topic,
    make_messages,
    text_messages,
    unique_topic,
)
from tests.security.helpers import (
    PLAIN_JAAS,
    Certificates,
    create_scram_user,
    make_certificates,
    ssl_listener_settings,
    subject_of_client,
)

pytestmark = pytest.mark.interop

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
    "SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0"
)
SCRAM_USER, SCRAM_PASSWORD = "scram-user", "scram-password"


@attrs.frozen
class SecureBroker:
    process: BrokerProcess
    certs: Certificates

    def address(self, listener: str) -> str:
        assert self.process.process.poll() is None, self.process.log_text()[-4000:]
        return f"127.0.0.1:{self.process.ports[listener]}"


async def _create_users(port: int) -> None:
    async with await KafkaConnection.connect("127.0.0.1", port, "admin") as admin:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            await create_scram_user(admin, SCRAM_USER, SCRAM_PASSWORD, mechanism)


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("secure")
    certs = make_certificates(base / "certs")
    settings = {
        **INTEROP_BROKER_SETTINGS,
        "listeners": LISTENERS,
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL"
        ),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        **ssl_listener_settings("SSL", certs),
        **ssl_listener_settings("SASL_SSL", certs),
        **ssl_listener_settings("MTLS", certs, "required"),
    }
    # DEBUG for the request log, whose lines name each request's principal.
    process = start_broker_process(base / "data", settings, log_level="DEBUG")
    try:
        trio.run(_create_users, process.ports["PLAINTEXT"])
        yield SecureBroker(process, certs)
    finally:
        code = stop_broker_process(process)
        assert code == 0, f"broker exited with {code}:\n{process.log_text()[-4000:]}"


def principals_in_log(broker: SecureBroker, listener: str) -> set[str]:
    found = set()
    for line in broker.process.log_text().splitlines():
        _, marker, entry = line.partition("Completed request:")
        if marker:
            record = json.loads(entry)
            # ApiVersions comes before authentication, as an anonymous request.
            name = record["requestHeader"]["requestApiKeyName"]
            if record["listener"] == listener and name != "ApiVersions":
                found.add(record["principal"])
    return found


def librdkafka_security(broker: SecureBroker, protocol: str, **extra: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {"security_protocol": protocol}
    if "SSL" in protocol:
        settings["ssl_ca_location"] = str(broker.certs.ca)
    settings.update(extra)
    return settings


def confluent_round_trip(bootstrap: str, security: dict[str, Any], admin: str) -> None:
    topic = unique_topic("secure-confluent")
    create_topic(admin, topic, partitions=2)
    messages = make_messages(300, 2, seed=11)
    confluent_produce(bootstrap, topic, messages, **security)
    consumer = Consumer(consumer_settings(bootstrap, **security))
    consumer.assign([RdPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    try:
        consumed = confluent_consume(
            bootstrap,
            topic,
            dict.fromkeys(range(2), OFFSET_BEGINNING),
            len(messages),
            consumer=consumer,
        )
    finally:
        consumer.close()
    assert_same_per_partition(messages, [c.message for c in consumed])


def test_confluent_kafka_produces_and_consumes_over_sasl_ssl_scram_sha_512(
    secure_broker: SecureBroker,
) -> None:
    security = librdkafka_security(
        secure_broker,
        "SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username=SCRAM_USER,
        sasl_password=SCRAM_PASSWORD,
    )
    confluent_round_trip(
        secure_broker.address("SASL_SSL"), security, secure_broker.address("PLAINTEXT")
    )
    assert principals_in_log(secure_broker, "SASL_SSL") == {f"User:{SCRAM_USER}"}


def test_confluent_kafka_with_a_client_certificate_is_its_subject(
    secure_broker: SecureBroker,
) -> None:
    certs = secure_broker.certs
    security = librdkafka_security(
        secure_broker,
        "SSL",
        ssl_certificate_location=str(certs.client_cert),
        ssl_key_location=str(certs.client_key),
    )
    confluent_round_trip(
        secure_broker.address("MTLS"), security, secure_broker.address("PLAINTEXT")
    )
    assert principals_in_log(secure_broker, "MTLS") == {f"User:{subject_of_client()}"}


def test_confluent_kafka_with_a_wrong_password_reports_an_authentication_error(
    secure_broker: SecureBroker,
) -> None:
    errors: list[Any] = []
    settings = consumer_settings(
        secure_broker.address("SASL_SSL"),
        **librdkafka_security(
            secure_broker,
            "SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username=SCRAM_USER,
            sasl_password="not-the-password",
        ),
        error_cb=errors.append,
    )
    consumer = Consumer(settings)
    try:
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert errors, "no error reported for a wrong password"
    assert any("Authentication failed" in e.str() or "SASL" in e.str() for e in errors), errors


# --- kafka-python -----------------------------------------------------------------------


def kafka_python_round_trip(bootstrap: str, admin: str, **security: Any) -> None:
    topic = unique_topic("secure-kafka-python")
    create_topic(admin, topic, partitions=1)
    messages = make_messages(200, 1, seed=5, nulls=False)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, request_timeout_ms=15000, max_block_ms=15000, **security
    )
    try:
        futures = [
            producer.send(topic, key=m.key, value=m.value, headers=list(m.headers), partition=0)
            for m in messages
        ]
        producer.flush(timeout=30)
        assert all(f.get(timeout=1).offset >= 0 for f in futures)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        request_timeout_ms=15000,
        **security,
    )
    got: list[Message] = []
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        deadline = time.monotonic() + 30
        while len(got) < len(messages) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [Message(r.key, r.value, tuple(r.headers or ()), 0) for r in records]
    finally:
        consumer.close()
    assert_same_per_partition(messages, got)


def test_kafka_python_produces_and_consumes_over_sasl_plaintext_plain(
    secure_broker: SecureBroker,
) -> None:
    kafka_python_round_trip(
        secure_broker.address("SASL_PLAINTEXT"),
        secure_broker.address("PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    assert principals_in_log(secure_broker, "SASL_PLAINTEXT") >= {"User:alice"}


def test_kafka_python_produces_and_consumes_over_ssl(secure_broker: SecureBroker) -> None:
    kafka_python_round_trip(
        secure_broker.address("SSL"),
        secure_broker.address("PLAINTEXT"),
        security_protocol="SSL",
        ssl_cafile=str(secure_broker.certs.ca),
    )
    assert principals_in_log(secure_broker, "SSL") == {"User:ANONYMOUS"}


# --- aiokafka -----------------------------------------------------------------------------


def test_aiokafka_produces_and_consumes_with_scram_sha_256(secure_broker: SecureBroker) -> None:
    bootstrap = secure_broker.address("SASL_SSL")
    topic = unique_topic("secure-aiokafka")
    create_topic(secure_broker.address("PLAINTEXT"), topic, partitions=1)
    messages = make_messages(200, 1, seed=3, nulls=False)
    security: dict[str, Any] = {
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=str(secure_broker.certs.ca)),
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": SCRAM_USER,
        "sasl_plain_password": SCRAM_PASSWORD,
    }

    async def scenario() -> list[Message]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, request_timeout_ms=15000, **security
        )
        await producer.start()
        try:
            for m in messages:
                await producer.send(topic, m.value, key=m.key, headers=list(m.headers), partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            request_timeout_ms=15000,
            **security,
        )
        await consumer.start()
        got: list[Message] = []
        try:
            from aiokafka import TopicPartition as AioPartition

            partition = AioPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            deadline = time.monotonic() + 30
            while len(got) < len(messages) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    got += [Message(r.key, r.value, tuple(r.headers or ()), 0) for r in records]
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert_same_per_partition(messages, got)


# --- kcat ------------------------------------------------------------------------------------


def kcat(broker: SecureBroker, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [
            KCAT,
            "-b",
            broker.address("SASL_SSL"),
            "-X",
            "security.protocol=SASL_SSL",
            "-X",
            "sasl.mechanisms=SCRAM-SHA-256",
            "-X",
            f"sasl.username={SCRAM_USER}",
            "-X",
            f"sasl.password={SCRAM_PASSWORD}",
            "-X",
            f"ssl.ca.location={broker.certs.ca}",
            "-X",
            "broker.address.family=v4",
            "-X",
            "socket.connection.setup.timeout.ms=5000",
            "-m",
            "10",
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"kcat {args} exited {result.returncode}:\n{result.stderr}"
    return result.stdout


def test_kcat_produces_and_consumes_over_sasl_ssl_scram(secure_broker: SecureBroker) -> None:
    topic = unique_topic("secure-kcat")
    create_topic(secure_broker.address("PLAINTEXT"), topic, partitions=1)
    messages = text_messages(300, 1, seed=2)
    lines = "".join(
        f"{m.key.decode()}\t{m.value.decode()}\n" for m in messages if m.key and m.value
    )
    kcat(secure_broker, "-P", "-t", topic, "-p", "0", "-K", "\t", stdin=lines)
    output = kcat(secure_broker, "-C", "-t", topic, "-e", "-J")
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    got = [Message(r["key"].encode(), r["payload"].encode(), (), r["partition"]) for r in records]
    assert_same_per_partition(messages, got)


def test_the_broker_log_never_shows_passwords(secure_broker: SecureBroker) -> None:
    text = secure_broker.process.log_text()
    assert "Completed request" in text
    for secret in ("alice-secret", "admin-secret", SCRAM_PASSWORD):
        assert secret not in text
    assert "Traceback" not in text
