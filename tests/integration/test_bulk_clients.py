"""Issue 19 item 7: bulk turns protect the small requests of interactive connections;
those of a connection that has sent a large request (a producer) do not keep the loop
from being quiet (bulk_turns.py)."""

from __future__ import annotations

from pathlib import Path

import trio

from bench import hostile_clients as hc
from bench.bench_network import request_bytes
from broker.protocol.messages import ApiVersionsRequest
from tests.integration.broker_harness import running_broker

SMALL = request_bytes(ApiVersionsRequest(), 0)
WAIT_S = 30.0


async def _answered(stream: trio.SocketStream, frame: bytes) -> None:
    """Send one request and read its whole response."""
    await stream.send_all(frame)
    received = bytearray()
    while len(received) < 4 or len(received) < 4 + int.from_bytes(received[:4], "big"):
        chunk = await stream.receive_some()
        assert chunk, "the broker closed the connection"
        received += chunk


async def test_only_small_requests_of_connections_without_large_ones_count(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server:
        port = server.bound_port(None)
        await hc.create_topic(port, "t")
        turns = server.socket_server.data_channel.bulk_turns
        with trio.fail_after(WAIT_S):
            interactive = await trio.open_tcp_stream("127.0.0.1", port)
            producer = await trio.open_tcp_stream("127.0.0.1", port)
            before = turns.small_requests
            await _answered(interactive, SMALL)
            assert turns.small_requests == before + 1
            await _answered(producer, SMALL)  # not yet known as a producer
            await _answered(producer, hc.large_produce_frame("t", 200_000))
            counted = turns.small_requests
            assert counted == before + 2
            await _answered(producer, SMALL)
            assert turns.small_requests == counted
            await _answered(interactive, SMALL)
            assert turns.small_requests == counted + 1
            await interactive.aclose()
            await producer.aclose()
