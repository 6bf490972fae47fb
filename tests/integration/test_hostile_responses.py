"""Issue 14, point 1a: large responses that clients never read stay within the response
budget (broker/net/response_memory.py), and a consumer still gets its records.

Real sockets; the in-process broker where the test reads the budget's own accounting,
a `broker serve` process where it reads RSS. Bounded in count and time.
"""

from __future__ import annotations

from pathlib import Path

import trio

from bench import hostile_clients as hc
from broker.client.connection import KafkaConnection
from broker.net.response_memory import MIN_GRANT
from tests.integration.broker_harness import broker_process, running_broker
from tests.integration.test_socket_server import wait_until
from tests.product.test_metrics import samples, value

MIB = 1 << 20
TOPIC = "fetched"
RECORD = 256 * 1024
ATTACKERS = 16


async def _consume_once(port: int) -> int:
    """Bytes of records one Fetch of the topic returns."""
    async with await KafkaConnection.connect("127.0.0.1", port, "consumer") as conn:
        with trio.fail_after(10):
            response = await conn.request(hc.fetch_body(TOPIC, 64 * MIB), 11)
    return len(response.responses[0].partitions[0].records or b"")


async def test_fetches_never_read_stay_within_the_response_budget(tmp_path: Path) -> None:
    pool_bytes = 2 * MIB
    overrides = {
        "queued.max.request.bytes": str(pool_bytes),
        "socket.request.max.bytes": str(MIB),
        "metrics.port": "0",
    }
    async with running_broker(tmp_path, overrides) as server:
        port = server.bound_port()
        budget = server.socket_server.memory_pool.responses
        await hc.create_topic(port, TOPIC)
        await hc.fill_topic(port, TOPIC, 8 * MIB, RECORD)
        frame = hc.large_fetch_frame(TOPIC, 64 * MIB)
        sent = [0]
        async with trio.open_nursery() as nursery:
            deadline = trio.current_time() + 2.0
            nursery.start_soon(hc.fetch_without_reading, port, frame, ATTACKERS, deadline, sent)
            await wait_until(lambda: budget.used >= pool_bytes)
            gauge = value(await samples(server), "kafka_network_socketserver_responsememoryused")
            consumed = await _consume_once(port)
            await trio.sleep_until(deadline)
        assert sent[0] >= ATTACKERS
        assert gauge is not None and gauge >= pool_bytes, "ResponseMemoryUsed shows the hold"
        assert consumed >= RECORD, "a consumer still gets at least one batch"
        # Unbounded, 16 connections would hold 8 MiB each; beyond the budget, each
        # response (the consumer's included) holds at most the floor or one batch.
        floor = max(MIN_GRANT, RECORD + 1024)
        assert pool_bytes <= budget.peak <= pool_bytes + (ATTACKERS + 1) * floor
        await wait_until(lambda: budget.used == 0)


def test_a_broker_process_under_fetches_never_read_keeps_memory_near_the_budget(
    tmp_path: Path,
) -> None:
    pool_bytes = 8 * MIB
    overrides = {"queued.max.request.bytes": str(pool_bytes), "socket.request.max.bytes": str(MIB)}
    with broker_process(tmp_path / "data", overrides) as broker:
        pid = broker.process.pid

        async def main() -> tuple[int, int, int]:
            await hc.create_topic(broker.port, TOPIC)
            await hc.fill_topic(broker.port, TOPIC, 8 * MIB, RECORD)
            await _consume_once(broker.port)
            before = hc.rss_bytes(pid)
            peak = [before]
            sent = [0]
            frame = hc.large_fetch_frame(TOPIC, 64 * MIB)
            async with trio.open_nursery() as nursery:
                deadline = trio.current_time() + 2.5
                nursery.start_soon(hc.sample_rss, pid, deadline, peak, 0.02)
                nursery.start_soon(
                    hc.fetch_without_reading, broker.port, frame, ATTACKERS, deadline, sent
                )
                await trio.sleep(0.5)
                consumed = await _consume_once(broker.port)
            return before, peak[0], consumed

        before, peak, consumed = trio.run(main)
        assert broker.process.poll() is None
    assert consumed >= RECORD
    # Unbounded, the 16 connections would hold 128 MiB of responses at once; within the
    # budget they hold 8 MiB plus the 1 MiB floor each (16 MiB), plus what reads cost.
    assert peak - before <= 4 * pool_bytes, (before, peak)
