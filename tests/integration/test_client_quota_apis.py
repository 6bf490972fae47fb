"""AlterClientQuotas and DescribeClientQuotas on a real broker over real sockets, their
persistence across a restart, authorization, and the per-IP connection creation rate.

Neither confluent-kafka nor kafka-python has a client-quota admin API, so these use
our client (the same functions `broker client quotas` runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from broker.client.cmd_quotas import alter_client_quotas, describe_client_quotas
from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.client.session import ClientError, ClientSession
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterClientQuotasRequest,
    ApiVersionsRequest,
    DescribeClientQuotasRequest,
)
from broker.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from broker.protocol.messages.describe_client_quotas_request import ComponentData
from broker.server import KafkaServer
from tests.integration.broker_harness import broker_process, env_without_proxies, running_broker


async def session(server: KafkaServer) -> ClientSession:
    return await ClientSession.open(f"127.0.0.1:{server.bound_port()}")


async def test_altered_quotas_are_described_and_survive_a_restart(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await session(server) as client:
        await alter_client_quotas(
            client,
            [("user", "alice")],
            [("producer_byte_rate", 1024), ("consumer_byte_rate", 2048)],
        )
        await alter_client_quotas(client, [("client-id", None)], [("request_percentage", 50)])
        await alter_client_quotas(client, [("user", "alice")], delete=["consumer_byte_rate"])
        await alter_client_quotas(
            client, [("user", "bob")], [("producer_byte_rate", 1)], validate_only=True
        )
        assert server.quotas.produce.quota_limit("alice", "any") == 1024
    async with running_broker(tmp_path) as server, await session(server) as client:
        assert await describe_client_quotas(client, [("user", "alice")]) == [
            ([("user", "alice")], {"producer_byte_rate": 1024.0})
        ]
        assert sorted(map(str, await describe_client_quotas(client, []))) == sorted(
            map(
                str,
                [
                    ([("user", "alice")], {"producer_byte_rate": 1024.0}),
                    ([("client-id", None)], {"request_percentage": 50.0}),
                ],
            )
        )
        # The restarted broker enforces what it read back.
        assert server.quotas.produce.quota_limit("alice", "any") == 1024
        assert server.quotas.request.quota_limit("bob", "x") == 50


async def test_invalid_alterations_fail_alone_with_invalid_request(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await session(server) as client:
        body = AlterClientQuotasRequest(
            entries=(
                EntryData(
                    entity=(EntityData("user", "alice"),),
                    ops=(OpData("producer_byte_rate", 100.0),),
                ),
                EntryData(
                    entity=(EntityData("ip", "10.0.0.1"), EntityData("user", "x")),
                    ops=(OpData("connection_creation_rate", 1.0),),
                ),
                EntryData(
                    entity=(EntityData("user", "carol"),), ops=(OpData("no_such_quota", 1.0),)
                ),
            )
        )
        response = await client.call(body)
        assert [e.error_code for e in response.entries] == [
            ErrorCode.NONE,
            ErrorCode.INVALID_REQUEST,
            ErrorCode.INVALID_REQUEST,
        ]
        with pytest.raises(ClientError, match="INVALID_REQUEST"):
            await alter_client_quotas(client, [("user", "a")], [("producer_byte_rate", 1.5)])
        bad_filter = await client.call(
            DescribeClientQuotasRequest(
                components=(ComponentData("ip", 1, None), ComponentData("user", 1, None))
            )
        )
        assert bad_filter.error_code == ErrorCode.INVALID_REQUEST


async def test_quota_apis_need_cluster_describe_configs_and_alter_configs(tmp_path: Path) -> None:
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    async with running_broker(tmp_path, overrides) as server, await session(server) as client:
        with pytest.raises(ClientError, match="CLUSTER_AUTHORIZATION_FAILED"):
            await alter_client_quotas(client, [("user", "a")], [("producer_byte_rate", 10)])
        with pytest.raises(ClientError, match="CLUSTER_AUTHORIZATION_FAILED"):
            await describe_client_quotas(client, [])
        assert len(server.quotas.configs) == 0


async def _answers(port: int) -> bool:
    """Whether a new connection is served (ApiVersions answered) or held and closed."""
    connection = await KafkaConnection.connect("127.0.0.1", port, "conn-rate")
    try:
        with trio.fail_after(5):
            await connection.request(ApiVersionsRequest(), 0)
        return True
    except (ConnectionClosed, trio.BrokenResourceError, OSError):
        return False
    finally:
        await connection.aclose()


async def test_an_ip_over_its_connection_creation_rate_is_held_then_closed(
    tmp_path: Path,
) -> None:
    overrides = {"quota.window.num": "2"}
    async with running_broker(tmp_path, overrides) as server, await session(server) as client:
        await alter_client_quotas(client, [("ip", "127.0.0.1")], [("connection_creation_rate", 2)])
        port = server.bound_port()
        started = trio.current_time()
        results = [await _answers(port) for _ in range(6)]
        elapsed = trio.current_time() - started
        # Two a second over a one-second span: the first ones in, then held and dropped.
        assert results[0] and not all(results), results
        assert results.count(True) <= 3
        # A refused connection is closed only after the throttle, not at once.
        assert elapsed >= 0.4
        await alter_client_quotas(
            client, [("ip", "127.0.0.1")], delete=["connection_creation_rate"]
        )
        assert all([await _answers(port) for _ in range(6)])


def test_broker_client_quotas_alter_and_describe_like_kafka_configs(tmp_path: Path) -> None:
    def client(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "broker.client", "-b", broker.bootstrap, "quotas", *args],
            capture_output=True,
            text=True,
            timeout=30,
            env=env_without_proxies(),
        )

    with broker_process(tmp_path / "data") as broker:
        entity = ["--entity-type", "users", "--entity-name", "alice"]
        entity += ["--entity-type", "clients", "--entity-default"]
        altered = client(
            "alter", *entity, "--add-config", "producer_byte_rate=1024,request_percentage=25"
        )
        assert altered.returncode == 0, altered.stderr
        described = client("describe", *entity, "--json")
        assert described.returncode == 0, described.stderr
        assert json.loads(described.stdout) == [
            {
                "entity": {"client-id": None, "user": "alice"},
                "quotas": {"producer_byte_rate": 1024.0, "request_percentage": 25.0},
            }
        ]
        bad = client("alter", "--entity-type", "ips", "--entity-name", "x", "--add-config", "a=1")
        assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stderr
