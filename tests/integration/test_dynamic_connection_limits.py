"""Connection limits change at runtime, as with Kafka's `kafka-configs --alter
--entity-type brokers`: an operator under a connection flood lowers
max.connections.per.ip and the next excess connection is closed at once, without a
restart; deleting the dynamic value restores the static one."""

from __future__ import annotations

from pathlib import Path

from broker.protocol.error_codes import ErrorCode
from tests.integration.broker_harness import connect, running_broker
from tests.integration.test_admin_apis import BROKER, DELETE, SET, incremental
from tests.integration.test_socket_server import api_versions_ok, assert_closed


async def test_lowering_max_connections_per_ip_at_runtime_closes_the_next_excess_one(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as admin:
        others = [await connect(server) for _ in range(2)]
        for conn in others:
            await api_versions_ok(conn)
        lowered = await incremental(admin, BROKER, "", ("max.connections.per.ip", SET, "3"))
        assert lowered.error_code == ErrorCode.NONE, lowered.error_message
        excess = await connect(server)
        await assert_closed(excess)
        for conn in [admin, *others]:
            await api_versions_ok(conn)  # those already open stay open
        restored = await incremental(admin, BROKER, "", ("max.connections.per.ip", DELETE, None))
        assert restored.error_code == ErrorCode.NONE, restored.error_message
        async with await connect(server) as again:
            await api_versions_ok(again)


async def test_an_invalid_connection_limit_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as admin:
        refused = await incremental(admin, BROKER, "", ("max.connections.per.ip", SET, "0"))
        assert refused.error_code == ErrorCode.INVALID_REQUEST
        assert "max.connections.per.ip" in refused.error_message
        async with await connect(server) as another:
            await api_versions_ok(another)
