"""A broker serving the console on a free port, and an HTTP client for its JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from broker.http_port import find_http_port
from broker.server import KafkaServer
from tests.client.cli_runner import run_cli
from tests.integration.broker_harness import running_broker

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
