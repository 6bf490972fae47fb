"""Small-request rate and latency: the broker beside a minimal Trio server.

Each server runs in its own process; the load generator runs here (the
machine has two cores: one for the server, one for the load). 64 connections
keep 5 requests each in flight for a bounded duration; we count responses and
time each request from its send to its response. The CPU each server process used
while the load ran, divided by the requests answered, is the cost per round trip:
unlike req/s it hardly depends on what else the machine runs.
"""

from __future__ import annotations

import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.servers import our_broker_process, process_cpu_seconds, running_process
from broker.protocol.api import RequestHeader, encode_request
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest

_SIZE = struct.Struct(">i")


def request_bytes(body: Any, version: int) -> bytes:
    header = RequestHeader(
        api_key=body.API_KEY, api_version=version, correlation_id=0, client_id="bench"
    )
    return b"".join(bytes(c) for c in encode_request(header, body))


async def _connection(
    port: int, template: bytes, depth: int, deadline: float, latencies: list[float]
) -> int:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    frame = bytearray(template)
    sent_at: dict[int, float] = {}
    next_id = 0

    async def send_one() -> None:
        nonlocal next_id
        next_id += 1
        frame[8:12] = _SIZE.pack(next_id)
        sent_at[next_id] = time.perf_counter()
        await stream.send_all(bytes(frame))

    for _ in range(depth):
        await send_one()
    buffer = bytearray()
    answered = 0
    while sent_at:
        data = await stream.receive_some(65536)
        if not data:
            break
        buffer += data
        while len(buffer) >= 8:
            size = _SIZE.unpack_from(buffer)[0]
            if len(buffer) < 4 + size:
                break
            correlation_id = _SIZE.unpack_from(buffer, 4)[0]
            del buffer[: 4 + size]
            latencies.append(time.perf_counter() - sent_at.pop(correlation_id))
            answered += 1
            if time.perf_counter() < deadline:
                await send_one()
    await stream.aclose()
    return answered


async def load(
    port: int, template: bytes, connections: int, depth: int, duration_s: float
) -> dict[str, float]:
    latencies: list[float] = []
    counts: list[int] = []
    started = time.perf_counter()
    deadline = started + duration_s

    async def one() -> None:
        counts.append(await _connection(port, template, depth, deadline, latencies))

    with trio.fail_after(duration_s + 30):
        async with trio.open_nursery() as nursery:
            for _ in range(connections):
                nursery.start_soon(one)
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": float(sum(counts)),
        "req_per_s": sum(counts) / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000 if latencies else float("nan"),
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan"),
    }


def run(duration_s: float = 3.0, connections: int = 64, depth: int = 5) -> list[dict[str, Any]]:
    workloads = {
        "ApiVersions v0": request_bytes(ApiVersionsRequest(), 0),
        "Metadata v12": request_bytes(MetadataRequest(topics=None), 12),
    }
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as data,
        our_broker_process(Path(data)) as (bootstrap, broker_pid),
        running_process(
            [sys.executable, "-m", "bench.minimal_server", "0"], Path(data) / "minimal.log"
        ) as (minimal_port, minimal_pid),
    ):
        broker_port = int(bootstrap.rsplit(":", 1)[1])
        # Warm both servers up (first connections, first-use allocations).
        for port in (minimal_port, broker_port):
            trio.run(load, port, workloads["ApiVersions v0"], connections, depth, 0.5)
        ceiling = measured_load(
            minimal_pid, minimal_port, workloads["ApiVersions v0"], connections, depth, duration_s
        )
        for name, template in workloads.items():
            ours = measured_load(broker_pid, broker_port, template, connections, depth, duration_s)
            rows.append(
                {
                    "benchmark": f"small requests: {name}, {connections} conns x {depth} pipelined",
                    "broker req/s": round(ours["req_per_s"]),
                    "broker CPU µs/request": round(ours["cpu_us_per_request"], 1),
                    "broker p50 ms": round(ours["p50_ms"], 2),
                    "broker p99 ms": round(ours["p99_ms"], 2),
                    "minimal trio req/s": round(ceiling["req_per_s"]),
                    "minimal trio CPU µs/request": round(ceiling["cpu_us_per_request"], 1),
                    "ratio broker/minimal": round(ours["req_per_s"] / ceiling["req_per_s"], 2),
                }
            )
    return rows


def measured_load(
    pid: int, port: int, template: bytes, connections: int, depth: int, duration_s: float
) -> dict[str, float]:
    """`load`, plus the server process's CPU µs per request answered."""
    before = process_cpu_seconds(pid)
    result = trio.run(load, port, template, connections, depth, duration_s)
    used = process_cpu_seconds(pid) - before
    result["cpu_us_per_request"] = used / max(result["requests"], 1.0) * 1e6
    return result


if __name__ == "__main__":
    for row in run():
        print(row)
