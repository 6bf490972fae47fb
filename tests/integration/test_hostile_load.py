"""Issue 14: the broker holds under hostile load (real sockets; brokers in-process where the
test reads the pool's own accounting, else `broker serve` processes).

Every attack is bounded in count and time and uses small sizes and short deadlines.
"""

from __future__ import annotations

import time
from pathlib import Path

import trio

from bench import hostile_clients as hc
from broker.client.connection import KafkaConnection
from broker.metrics import Meter
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest
from tests.integration.broker_harness import broker_process, connect, running_broker
from tests.integration.test_socket_server import (
    SLOW,
    _topic,
    gate_metadata,
    no_response_within,
    wait_until,
)
from tests.trio_clock import at_real_speed, autojump

MIB = 1 << 20
TOPIC = "hostile"


async def _bystander_rounds(port: int, rounds: int, pause_s: float) -> list[float]:
    """ApiVersions+Metadata `rounds` times; every round must be answered within 5 s."""
    latencies: list[float] = []
    async with await KafkaConnection.connect("127.0.0.1", port, "bystander") as conn:
        for _ in range(rounds):
            started = time.perf_counter()
            with trio.fail_after(5):
                await conn.request(ApiVersionsRequest(), 3)
                await conn.request(MetadataRequest(topics=None), 9)
            latencies.append(time.perf_counter() - started)
            await trio.sleep(pause_s)
    return latencies


async def test_connections_pipelining_large_frames_stay_within_the_pool(tmp_path: Path) -> None:
    pool_bytes = 4 * MIB
    overrides = {
        "queued.max.request.bytes": str(pool_bytes),
        "socket.request.max.bytes": str(MIB),
        "num.io.threads": "2",
    }
    async with running_broker(tmp_path, overrides) as server:
        port = server.bound_port()
        pool = server.socket_server.memory_pool
        await hc.create_topic(port, TOPIC)
        frame = hc.large_produce_frame(TOPIC, 256 * 1024)
        most_used = 0
        most_waiting = 0
        sent = [0]

        async def watch_pool() -> None:
            nonlocal most_used, most_waiting
            while True:
                most_used = max(most_used, pool.used)
                most_waiting = max(most_waiting, pool.waiting)
                await trio.sleep(0.005)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_pool)
            deadline = trio.current_time() + 2.0
            nursery.start_soon(hc.pipeline_without_reading, port, frame, 24, deadline, sent)
            await trio.sleep(0.5)
            latencies = await _bystander_rounds(port, 5, 0.1)
            await trio.sleep_until(deadline)
            nursery.cancel_scope.cancel()
        assert sent[0] > 24
        assert most_waiting > 0, "the attack never had to wait for the pool"
        assert 0 < most_used <= pool_bytes
        assert len(latencies) == 5
        await wait_until(lambda: pool.used == 0)


async def test_a_small_request_is_answered_while_large_ones_wait_for_the_pool(
    tmp_path: Path,
) -> None:
    # Pool 16000: large requests share 14400 of it, requests of at most 100 bytes
    # may use the rest.
    overrides = {
        "queued.max.request.bytes": "16000",
        "socket.request.max.bytes": "8000",
        "num.io.threads": "4",
    }
    async with running_broker(tmp_path, overrides) as server:
        gated = gate_metadata(server)
        pool = server.socket_server.memory_pool
        padding = tuple(_topic("t" * 200) for _ in range(30))  # about 6.2 KB a request
        holders = [await connect(server, client_id=SLOW) for _ in range(2)]
        for holder in holders:
            await holder.send(MetadataRequest(topics=padding), 9)
        await wait_until(lambda: gated.waiting == 2)
        large = await connect(server)
        await large.send(MetadataRequest(topics=padding), 9)
        await wait_until(lambda: pool.waiting == 1)
        small = await connect(server)
        with trio.fail_after(5):
            await small.request(ApiVersionsRequest(), 3)
        assert await no_response_within(large, 0.2)
        gated.gate.set()
        with trio.fail_after(5):
            await large.receive()
            for holder in holders:
                await holder.receive()


async def test_slow_senders_are_closed_after_the_read_timeout_and_counted(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    overrides = {"socket.request.read.timeout.ms": "400", "num.network.threads": "1"}
    at_real_speed(mock_clock)
    async with running_broker(tmp_path, overrides) as server:
        autojump(mock_clock)
        port = server.bound_port()
        closed_after: list[float] = []
        idle = await connect(server)
        with trio.fail_after(10):
            await hc.slow_senders(port, 10, 100_000, 0.05, trio.current_time() + 5, closed_after)
        assert len(closed_after) == 10
        # Trio's mock clock: the reaper closes each at its deadline, 0.4 s after the first
        # byte, or at the latest one timeout later (when it slept before that was armed).
        assert all(0.4 - 1e-6 <= t <= 0.8 + 1e-6 for t in closed_after), closed_after
        # A connection between requests has no read deadline.
        with trio.fail_after(5):
            await idle.request(ApiVersionsRequest(), 3)
        meter = server.metrics.get(
            "kafka.server",
            "socket-server-metrics",
            "read-timeout-connections-killed",
            listener="PLAINTEXT",
            networkProcessor="0",
        )
        assert isinstance(meter, Meter)
        assert meter.count == 10
        at_real_speed(mock_clock)


def test_a_broker_process_closes_slow_senders_and_keeps_answering(tmp_path: Path) -> None:
    overrides = {"socket.request.read.timeout.ms": "500"}
    with broker_process(tmp_path / "data", overrides) as broker:

        async def main() -> tuple[list[float], list[float]]:
            closed_after: list[float] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    hc.slow_senders,
                    broker.port,
                    30,
                    MIB,
                    0.2,
                    trio.current_time() + 6,
                    closed_after,
                )
                latencies = await _bystander_rounds(broker.port, 10, 0.1)
            return closed_after, latencies

        closed_after, latencies = trio.run(main)
        assert len(closed_after) == 30
        assert max(closed_after) < 3.0
        assert len(latencies) == 10
        assert broker.process.poll() is None
        log = broker.log_text()
    assert "socket.request.read.timeout.ms" in log


def test_hostile_frames_never_crash_the_broker_and_lose_no_acknowledged_record(
    tmp_path: Path,
) -> None:
    with broker_process(tmp_path / "data", {"socket.request.max.bytes": str(MIB)}) as broker:

        async def main() -> tuple[int, int, hc.ProducerTally, list[float]]:
            await hc.create_topic(broker.port, TOPIC)
            sent = [0]
            tally = hc.ProducerTally()
            frames = hc.hostile_frames(TOPIC, seed=14, max_request_bytes=MIB)
            async with trio.open_nursery() as nursery:
                deadline = trio.current_time() + 4
                nursery.start_soon(
                    hc.send_hostile_frames, broker.port, frames, 1500, deadline, 4, sent
                )
                nursery.start_soon(hc.acks_all_producer, broker.port, TOPIC, deadline, tally)
                latencies = await _bystander_rounds(broker.port, 20, 0.1)
            return sent[0], await hc.log_end_offset(broker.port, TOPIC), tally, latencies

        sent, end_offset, tally, latencies = trio.run(main)
        assert broker.process.poll() is None
        assert sent >= 100
        assert len(latencies) == 20
        assert tally.acknowledged > 0
        # Hostile produces to the topic add records too; none acknowledged may be missing.
        assert end_offset >= tally.acknowledged


def test_a_broker_process_under_large_pipelined_frames_keeps_memory_near_the_pool(
    tmp_path: Path,
) -> None:
    pool_bytes = 8 * MIB
    overrides = {"queued.max.request.bytes": str(pool_bytes), "socket.request.max.bytes": str(MIB)}
    with broker_process(tmp_path / "data", overrides) as broker:
        pid = broker.process.pid

        async def main() -> tuple[int, int, list[float]]:
            await hc.create_topic(broker.port, TOPIC)
            await _bystander_rounds(broker.port, 3, 0.0)
            before = hc.rss_bytes(pid)
            peak = [before]
            sent = [0]
            frame = hc.large_produce_frame(TOPIC, 512 * 1024)
            async with trio.open_nursery() as nursery:
                deadline = trio.current_time() + 2.5
                nursery.start_soon(hc.sample_rss, pid, deadline, peak, 0.02)
                nursery.start_soon(
                    hc.pipeline_without_reading, broker.port, frame, 32, deadline, sent
                )
                await trio.sleep(0.3)
                latencies = await _bystander_rounds(broker.port, 10, 0.1)
            return before, peak[0], latencies

        before, peak, latencies = trio.run(main)
        assert broker.process.poll() is None
    assert len(latencies) == 10
    # 32 connections announce 16 MiB of frames at once, twice the pool; what the broker
    # holds beyond its baseline stays near the pool (frames, decoded requests, log I/O).
    assert peak - before <= 2 * pool_bytes, (before, peak)
