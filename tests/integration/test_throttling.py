"""KIP-219 throttling end to end on a real broker and socket: the throttled response
goes out at once with throttle_time_ms, then the connection is muted for that long,
so a request pipelined behind it waits; the quota metrics show the client."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.client.cmd_quotas import alter_client_quotas
from broker.client.connection import KafkaConnection
from broker.client.session import ClientSession
from broker.protocol.messages import MetadataRequest
from tests.integration.broker_harness import running_broker
from tests.integration.data_helpers import PRODUCE_VERSION, batch, create_topic, produce_request

QUOTA = 10_000  # bytes/s


async def test_a_throttled_response_is_sent_at_once_then_the_connection_is_muted(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"quota.window.num": "2"}) as server:
        port = server.bound_port()
        async with await ClientSession.open(f"127.0.0.1:{port}") as admin:
            await create_topic(admin.connection, "throttled")
            await alter_client_quotas(
                admin, [("client-id", "slow")], [("producer_byte_rate", QUOTA)]
            )
        connection = await KafkaConnection.connect("127.0.0.1", port, "slow")
        async with connection:
            # 3 windows' worth over a one-window minimum span: 2 s over the quota.
            big = produce_request("throttled", {0: batch([b"x" * (3 * QUOTA)])}, acks=1)
            started = trio.current_time()
            await connection.send(big, PRODUCE_VERSION)
            await connection.send(MetadataRequest(topics=()), 12)  # pipelined behind it
            _, produced = await connection.receive()
            answered_at = trio.current_time() - started
            samples = {(s.type_, s.name, s.tags): s.values for s in server.metrics.snapshot()}
            _, metadata = await connection.receive()
            second_at = trio.current_time() - started
        throttle_s = produced.throttle_time_ms / 1000
        assert produced.responses[0].partition_responses[0].error_code == 0
        assert produced.throttle_time_ms >= 1000
        assert answered_at < throttle_s / 2  # the response itself was not held back
        assert second_at >= throttle_s * 0.95  # but nothing more was read until the end
        assert metadata.throttle_time_ms == 0  # the next request is within its (no) quota
        tags = (("client-id", "slow"), ("user", ""))
        assert samples[("Produce", "byte-rate", tags)]["value"] > QUOTA
        assert samples[("Produce", "throttle-time", tags)]["value"] == produced.throttle_time_ms


async def test_clients_of_other_client_ids_are_not_throttled(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        port = server.bound_port()
        async with await ClientSession.open(f"127.0.0.1:{port}") as admin:
            await create_topic(admin.connection, "free")
            await alter_client_quotas(admin, [("client-id", "slow")], [("producer_byte_rate", 1)])
        async with await KafkaConnection.connect("127.0.0.1", port, "fast") as connection:
            for _ in range(5):
                request = produce_request("free", {0: batch([b"x" * 10_000])}, acks=1)
                response = await connection.request(request, PRODUCE_VERSION)
                assert response.throttle_time_ms == 0


async def test_request_time_over_request_percentage_is_throttled_within_one_window(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server:
        port = server.bound_port()
        async with await ClientSession.open(f"127.0.0.1:{port}") as admin:
            await alter_client_quotas(
                admin, [("user", None), ("client-id", "busy")], [("request_percentage", 0.01)]
            )
        throttles = []
        async with await KafkaConnection.connect("127.0.0.1", port, "busy") as connection:
            with trio.fail_after(20):
                for _ in range(200):
                    response = await connection.request(MetadataRequest(topics=None), 12)
                    throttles.append(response.throttle_time_ms)
                    if response.throttle_time_ms:
                        break
        assert throttles[-1] > 0
        assert max(throttles) <= 1000  # bounded by quota.window.size.seconds
