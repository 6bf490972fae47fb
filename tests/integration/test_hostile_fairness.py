"""Issue 14, points 2 and 3: bad first frames are rejected before a connection is
registered (and counted), and small requests get past a flood of large ones with each
connection's order kept. Real sockets; a `broker serve` process for the flood.

Every attack is bounded in count and time.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import trio

from bench import hostile_clients as hc
from broker.client.connection import KafkaConnection
from broker.metrics import Meter
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest
from broker.server import KafkaServer
from tests.integration.broker_harness import broker_process, connect, running_broker
from tests.integration.test_socket_server import (
    api_versions_ok,
    assert_closed,
    raw_frame,
    wait_until,
)

MIB = 1 << 20
TOPIC = "flood"

BAD_FIRST_FRAMES = {
    "oversize": struct.pack(">i", 4096) + b"x" * 16,
    "negative-size": struct.pack(">i", -5),
    "garbage-header": struct.pack(">i", 6) + b"\xff\xff\xff\xff\xff\xff",
    "unknown-api-key": raw_frame(999, 0, 1),
    "unsupported-version": raw_frame(3, 99, 1),
    "garbage-body": raw_frame(3, 12, 1, b"\xff\xff\xff", flexible=True),
    "empty-frame": struct.pack(">i", 0),
}


def _meter(server: KafkaServer, name: str) -> Meter:
    (processor,) = server.socket_server.processors["PLAINTEXT"]
    meter = server.metrics.get(
        "kafka.server",
        "socket-server-metrics",
        name,
        listener="PLAINTEXT",
        networkProcessor=str(processor.id),
    )
    assert isinstance(meter, Meter)
    return meter


async def _send_bad(port: int, frame: bytes, how: str) -> None:
    """One bad frame on a fresh connection: with the connection, after a pause (so the
    connection is screened before anything arrived), or in two parts."""
    conn = await KafkaConnection.connect("127.0.0.1", port)
    try:
        if how == "at-once":
            await conn.send_raw(frame)
        elif how == "late":
            await trio.sleep(0.05)
            await conn.send_raw(frame)
        else:
            await conn.send_raw(frame[:3])
            await trio.sleep(0.05)
            await conn.send_raw(frame[3:])
        await assert_closed(conn)
    finally:
        await conn.aclose()


@pytest.mark.parametrize("how", ["at-once", "late", "in-two-parts"])
async def test_bad_first_frames_are_closed_unanswered_and_counted(tmp_path: Path, how: str) -> None:
    overrides = {"socket.request.max.bytes": "1024", "num.network.threads": "1"}
    async with running_broker(tmp_path, overrides) as server:
        port = server.bound_port()
        bystander = await connect(server)
        await api_versions_ok(bystander)
        invalid = _meter(server, "invalid-request-connections-closed")
        closed = _meter(server, "connection-close")
        for frame in BAD_FIRST_FRAMES.values():
            await _send_bad(port, frame, how)
        await wait_until(lambda: closed.count == len(BAD_FIRST_FRAMES))
        assert invalid.count == len(BAD_FIRST_FRAMES)
        assert _meter(server, "connection-creation").count == len(BAD_FIRST_FRAMES) + 1
        assert server.socket_server.quotas.total_count() == 1
        await api_versions_ok(bystander)


async def test_a_connection_silent_past_the_grace_period_is_still_served(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"num.network.threads": "1"}) as server:
        conn = await connect(server)
        await trio.sleep(0.4)  # past FIRST_BYTES_GRACE_S: registered without bytes
        await api_versions_ok(conn)
        await api_versions_ok(conn)


async def test_a_hang_up_before_any_frame_is_a_close_not_an_invalid_request(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"num.network.threads": "1"}) as server:
        port = server.bound_port()
        for pause in (0.0, 0.05):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await trio.sleep(pause)
            await stream.send_all(raw_frame(18, 3, 1)[:5])  # part of a frame, then EOF
            await stream.aclose()
        closed = _meter(server, "connection-close")
        await wait_until(lambda: closed.count == 2)
        assert _meter(server, "invalid-request-connections-closed").count == 0
        assert server.socket_server.quotas.total_count() == 0


async def test_a_first_request_followed_by_end_of_stream_is_answered(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        await conn.send(ApiVersionsRequest(), 3)
        await conn.send(MetadataRequest(topics=None), 9)
        assert isinstance(conn.stream, trio.SocketStream)
        await conn.stream.send_eof()
        with trio.fail_after(5):
            first, _ = await conn.receive()
            second, _ = await conn.receive()
        assert (first, second) == (1, 2)
        await assert_closed(conn)
        await conn.aclose()


def test_small_requests_get_answers_in_order_while_large_frames_flood_the_broker(
    tmp_path: Path,
) -> None:
    overrides = {"queued.max.request.bytes": str(8 * MIB), "socket.request.max.bytes": str(MIB)}
    with broker_process(tmp_path / "data", overrides) as broker:

        async def main() -> tuple[int, list[int], list[int]]:
            await hc.create_topic(broker.port, TOPIC)
            sent = [0]
            flood = hc.large_produce_frame(TOPIC, 512 * 1024)
            mine = hc.produce_body(TOPIC, [b"m" * (300 * 1024)], acks=1)
            async with trio.open_nursery() as nursery:
                deadline = trio.current_time() + 3
                nursery.start_soon(
                    hc.pipeline_without_reading, broker.port, flood, 24, deadline, sent
                )
                await trio.sleep(0.5)
                async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
                    expected: list[int] = []
                    # Large and small requests of one connection, pipelined: answered in
                    # the order sent though they are queued in different lanes.
                    for _ in range(3):
                        expected.append(await conn.send(mine, 9))
                        for i in range(4):
                            if i % 2:
                                expected.append(await conn.send(MetadataRequest(topics=None), 9))
                            else:
                                expected.append(await conn.send(ApiVersionsRequest(), 3))
                    with trio.fail_after(20):
                        answered = [(await conn.receive())[0] for _ in expected]
                nursery.cancel_scope.cancel()
            return sent[0], expected, answered

        sent, expected, answered = trio.run(main)
        assert broker.process.poll() is None
    assert sent > 24
    assert answered == expected
