"""Dynamic broker configs reach every process of a cluster: a cluster-wide default sent to
one process is described and enforced by another within a few poll intervals, while a
per-broker value stays with its own node."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.client.connection import KafkaConnection
from broker.config.types import ConfigSource
from broker.protocol.error_codes import ErrorCode
from tests.integration.broker_harness import start_broker_process, stop_broker_process
from tests.integration.test_admin_apis import BROKER, SET, describe, incremental
from tests.integration.test_socket_server import api_versions_ok, assert_closed

PER_IP_LIMIT = 3


async def described(conn: KafkaConnection, node_id: int, name: str) -> tuple[str, int]:
    result = await describe(conn, BROKER, str(node_id), [name])
    assert result.error_code == ErrorCode.NONE, result.error_message
    (entry,) = result.configs
    return entry.value, entry.config_source


async def test_a_cluster_default_sent_to_one_process_reaches_the_other(tmp_path: Path) -> None:
    cluster = start_broker_process(
        tmp_path / "data", {"process.count": "2", "cluster.metadata.poll.interval.ms": "50"}
    )
    try:
        (first_node, first), (second_node, second) = sorted(cluster.node_ports().items())
        async with (
            await KafkaConnection.connect("127.0.0.1", first, "test") as one,
            await KafkaConnection.connect("127.0.0.1", second, "test") as other,
        ):
            changes = (
                await incremental(
                    one, BROKER, "", ("max.connections.per.ip", SET, str(PER_IP_LIMIT))
                ),
                await incremental(one, BROKER, str(first_node), ("max.connections", SET, "500")),
            )
            assert [c.error_code for c in changes] == [ErrorCode.NONE] * 2
            expected = (str(PER_IP_LIMIT), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            with trio.fail_after(10):  # 200 poll intervals
                while await described(other, second_node, "max.connections.per.ip") != expected:  # noqa: ASYNC110 - another process
                    await trio.sleep(0.05)
            own_limit = await described(other, second_node, "max.connections")
            assert own_limit[1] == ConfigSource.DEFAULT_CONFIG, "node 1's value is node 1's"
            # The writer's own file follower may briefly apply the file as the first
            # change left it (read before the second landed) until its next poll.
            own = ("500", ConfigSource.DYNAMIC_BROKER_CONFIG)
            with trio.fail_after(10):
                while await described(one, first_node, "max.connections") != own:  # noqa: ASYNC110 - its file follower
                    await trio.sleep(0.05)
            with trio.fail_after(20):
                more = [
                    await KafkaConnection.connect("127.0.0.1", second, "test")
                    for _ in range(PER_IP_LIMIT - 1)
                ]
                for conn in more:
                    await api_versions_ok(conn)
                excess = await KafkaConnection.connect("127.0.0.1", second, "test")
                await assert_closed(excess)
                for conn in [other, *more]:
                    await api_versions_ok(conn)
                    if conn is not other:
                        await conn.aclose()
    finally:
        assert stop_broker_process(cluster) == 0, cluster.log_text()[-4000:]
