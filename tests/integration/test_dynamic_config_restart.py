"""Dynamic broker configs outlive the broker process, as Kafka's do (its metadata log):
an operator lowers max.connections.per.ip with a real admin client (and sets a
cluster-wide default with ours), the broker restarts
on the same log dir, and the limit is still described with its source and enforced from
the first connection."""

from __future__ import annotations

from pathlib import Path

import trio
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from broker.client.connection import KafkaConnection
from broker.config.types import ConfigSource
from broker.protocol.error_codes import ErrorCode
from tests.integration.broker_harness import broker_process, connect, running_broker
from tests.integration.test_admin_apis import BROKER, SET, describe, incremental
from tests.integration.test_socket_server import api_versions_ok, assert_closed
from tests.interop.kafka_clients import admin

PER_IP_LIMIT = 3


def alter_with_confluent(bootstrap: str) -> None:
    """Node 1's max.connections.per.ip, as `kafka-configs --alter --entity-type brokers
    --entity-name 1` would (librdkafka refuses the empty name of the cluster default)."""
    client = admin(bootstrap)
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry(
                "max.connections.per.ip",
                str(PER_IP_LIMIT),
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    client.incremental_alter_configs([resource])[resource].result(20)


async def test_a_connection_limit_set_with_an_admin_client_survives_a_restart(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with broker_process(data) as broker:
        await trio.to_thread.run_sync(alter_with_confluent, broker.bootstrap)
        async with await KafkaConnection.connect("127.0.0.1", broker.port, "test") as conn:
            default = await incremental(conn, BROKER, "", ("max.connections", SET, "1000"))
            assert default.error_code == ErrorCode.NONE, default.error_message
    with broker_process(data) as broker:
        with trio.fail_after(20):
            first = await KafkaConnection.connect("127.0.0.1", broker.port, "test")
            async with first:
                result = await describe(
                    first, BROKER, "1", ["max.connections.per.ip", "max.connections"]
                )
                assert result.error_code == ErrorCode.NONE, result.error_message
                entries = {c.name: (c.value, c.config_source) for c in result.configs}
                assert entries == {
                    "max.connections.per.ip": (
                        str(PER_IP_LIMIT),
                        ConfigSource.DYNAMIC_BROKER_CONFIG,
                    ),
                    "max.connections": ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                }
                others = [
                    await KafkaConnection.connect("127.0.0.1", broker.port, "test")
                    for _ in range(PER_IP_LIMIT - 1)
                ]
                for conn in others:
                    await api_versions_ok(conn)
                excess = await KafkaConnection.connect("127.0.0.1", broker.port, "test")
                await assert_closed(excess)
                for conn in [first, *others]:
                    await api_versions_ok(conn)  # those within the limit stay open
                for conn in others:
                    await conn.aclose()


async def test_stored_thread_counts_are_what_the_restarted_broker_starts_with(
    tmp_path: Path,
) -> None:
    """base_config runs 2 and 2; stored counts of 4 (network, per broker) and 3 (io,
    cluster default) are running right after the restart, with no resize."""
    async with running_broker(tmp_path) as server, await connect(server) as admin_conn:
        changes = (
            await incremental(admin_conn, BROKER, "1", ("num.network.threads", SET, "4")),
            await incremental(admin_conn, BROKER, "", ("num.io.threads", SET, "3")),
        )
        assert [c.error_code for c in changes] == [ErrorCode.NONE] * 2
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        assert [len(p) for p in server.socket_server.processors.values()] == [4]
        assert server.data_handlers.size == 3
        assert server.config.get_int("num.io.threads") == 2, "the static layer is unchanged"
        result = await describe(conn, BROKER, "1", ["num.io.threads", "num.network.threads"])
        assert {c.name: (c.value, c.config_source) for c in result.configs} == {
            "num.io.threads": ("3", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            "num.network.threads": ("4", ConfigSource.DYNAMIC_BROKER_CONFIG),
        }
        doubled = await incremental(conn, BROKER, "1", ("num.io.threads", SET, "6"))
        assert doubled.error_code == ErrorCode.NONE, "half..double is measured from 3"
        assert server.data_handlers.size == 6
