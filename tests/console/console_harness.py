"""A broker serving the console on a free port, and an HTTP client for its JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from confluent_kafka import Producer

from broker.http_port import find_http_port
from broker.server import KafkaServer
from tests.client.cli_runner import run_cli
from tests.integration.broker_harness import running_broker
from tests.interop.kafka_clients import rdkafka_settings
from tests.interop.txn_helpers import produce_values, transactional_producer

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "authorizer.class.name": AUTHORIZER,
    "super.users": "User:ANONYMOUS;User:admin",
    "connection.failed.authentication.delay.ms": "0",
}


def console_url(server: KafkaServer) -> str:
    port = find_http_port(server.services)
    assert port is not None and port.bound_port
    return f"http://127.0.0.1:{port.bound_port}"


@asynccontextmanager
async def console_broker(
    tmp_path: Path, overrides: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[KafkaServer, httpx.AsyncClient]]:
    settings = {"metrics.port": "0", **(overrides or {})}
    async with (
        running_broker(tmp_path / "data", settings) as server,
        httpx.AsyncClient(base_url=console_url(server), timeout=30) as client,
    ):
        yield server, client


def admin_cli(server: KafkaServer, *argv: str, stdin: bytes = b"") -> str:
    """`broker client` as the super user ANONYMOUS on the PLAINTEXT listener."""
    result = run_cli(["-b", f"127.0.0.1:{server.bound_port('PLAINTEXT')}", *argv], stdin)
    assert result.code == 0, result.err
    return result.out.decode()


def allow(server: KafkaServer, principal: str, resource: str, name: str, *operations: str) -> None:
    """An ALLOW ACL, as `acls add`: `resource` is --topic, --group..."""
    argv = ["acls", "add", "--allow-principal", principal, resource, name]
    for operation in operations:
        argv += ["--operation", operation]
    admin_cli(server, *argv)


def produce_plain(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer(rdkafka_settings(bootstrap))
    producer.produce(topic, value=value, partition=0)
    producer.flush(20)


def produce_transaction(
    bootstrap: str, topic: str, transactional_id: str, values: list[bytes], commit: bool | None
) -> Producer:
    """One transaction of librdkafka's to partition 0, committed, aborted, or left open
    (None; its producer is returned to end it)."""
    producer = transactional_producer(bootstrap, transactional_id)
    producer.begin_transaction()
    produce_values(producer, topic, values, 1)
    if commit is True:
        producer.commit_transaction(20)
    elif commit is False:
        producer.abort_transaction(20)
    return producer
