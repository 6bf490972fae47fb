"""The network front-end, end to end over real sockets on 127.0.0.1.

A Metadata handler with a gate stands in for slow work (requests from client
id "slow" wait until the test opens the gate); everything else is the real
broker: acceptor, processors, request channel, handler pool and API layer.
"""

from __future__ import annotations

import logging
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.handlers.metadata import MetadataHandler
from broker.net.request import Request
from broker.protocol.api import decode_response
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from broker.server import KafkaServer
from tests.integration.broker_harness import connect, running_broker
from tests.trio_clock import at_real_speed, autojump
from tests.waiting import wait_until as wait_until  # re-exported: the hostile tests use it

SLOW = "slow"


class GatedMetadata:
    """Metadata, except that requests from client id "slow" wait for `gate`."""

    api_key = 3
    min_version = 0
    max_version = 12

    def __init__(self, inner: MetadataHandler) -> None:
        self.inner = inner
        self.gate = trio.Event()
        self.waiting = 0
        self.fail_next = False

    async def handle(self, request: Request) -> Any:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("handler bug")
        if request.header.client_id == SLOW:
            self.waiting += 1
            await self.gate.wait()
        return await self.inner.handle(request)

    def error_response(self, request: Request, error_code: int) -> Any:
        return self.inner.error_response(request, error_code)


def gate_metadata(server: KafkaServer) -> GatedMetadata:
    gated = GatedMetadata(server.metadata)
    server.apis.add_handler(gated)
    return gated


async def no_response_within(conn: KafkaConnection, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        await conn.receive_frame()
        return False
    return True


async def assert_closed(conn: KafkaConnection, timeout_s: float = 5.0) -> None:
    with trio.fail_after(timeout_s), pytest.raises((ConnectionClosed, trio.BrokenResourceError)):
        await conn.receive_frame()


async def api_versions_ok(conn: KafkaConnection, version: int = 3) -> None:
    with trio.fail_after(5):
        response = await conn.request(
            ApiVersionsRequest(client_software_name="tests", client_software_version="1.0"), version
        )
    assert response.error_code == ErrorCode.NONE


def raw_frame(
    api_key: int, version: int, correlation_id: int, rest: bytes = b"", flexible: bool = False
) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    if flexible:
        header += b"\x00"
    payload = header + rest
    return struct.pack(">i", len(payload)) + payload


# -- ordering and isolation ---------------------------------------------------------


async def test_pipelined_requests_are_answered_in_order(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"num.io.threads": "4"}) as server:
        conn = await connect(server)
        sent = []
        for i in range(30):
            if i % 3 == 0:
                sent.append(await conn.send(MetadataRequest(topics=None), 1 + i % 12))
            else:
                sent.append(await conn.send(ApiVersionsRequest(), i % 4))
        with trio.fail_after(10):
            received = [(await conn.receive())[0] for _ in sent]
        assert received == sent
        await conn.aclose()


async def test_a_request_is_not_read_before_the_previous_response_is_written(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"num.io.threads": "4"}) as server:
        gated = gate_metadata(server)
        conn = await connect(server, client_id=SLOW)
        slow_id = await conn.send(MetadataRequest(topics=None), 9)
        fast_id = await conn.send(ApiVersionsRequest(), 0)
        assert await no_response_within(conn, 0.3)
        assert gated.waiting == 1
        gated.gate.set()
        with trio.fail_after(5):
            assert (await conn.receive())[0] == slow_id
            assert (await conn.receive())[0] == fast_id


async def test_a_slow_request_does_not_delay_another_connection(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"num.network.threads": "1"}) as server:
        gated = gate_metadata(server)
        slow = await connect(server, client_id=SLOW)
        await slow.send(MetadataRequest(topics=None), 9)
        await wait_until(lambda: gated.waiting == 1)
        other = await connect(server)
        await api_versions_ok(other)
        metadata = await other.request(MetadataRequest(topics=None), 12)
        assert metadata.brokers[0].port == server.bound_port()
        gated.gate.set()
        with trio.fail_after(5):
            await slow.receive()


async def test_a_full_request_channel_back_pressures_readers(tmp_path: Path) -> None:
    overrides = {"queued.max.requests": "1", "num.io.threads": "1", "num.network.threads": "1"}
    async with running_broker(tmp_path, overrides) as server:
        gated = gate_metadata(server)
        channel = server.socket_server.data_channel
        first = await connect(server, client_id=SLOW)
        await first.send(MetadataRequest(topics=None), 9)
        await wait_until(lambda: gated.waiting == 1)
        second = await connect(server, client_id=SLOW)
        await second.send(MetadataRequest(topics=None), 9)
        await wait_until(lambda: channel.request_queue_size() == 1)
        third = await connect(server)
        await third.send(ApiVersionsRequest(), 0)
        assert await no_response_within(third, 0.3)
        assert channel.request_queue_size() == 1
        gated.gate.set()
        with trio.fail_after(5):
            for conn in (first, second, third):
                await conn.receive()


# -- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_bytes",
    [
        pytest.param(struct.pack(">i", 4096) + b"x" * 16, id="oversize"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(struct.pack(">i", 6) + b"\xff\xff\xff\xff\xff\xff", id="garbage-header"),
        pytest.param(raw_frame(999, 0, 1), id="unknown-api-key"),
        pytest.param(raw_frame(3, 99, 1), id="unsupported-version"),
        pytest.param(raw_frame(3, 12, 1, b"\xff\xff\xff", flexible=True), id="garbage-body"),
        pytest.param(struct.pack(">i", 0), id="empty-frame"),
    ],
)
async def test_bad_frames_close_only_their_own_connection(tmp_path: Path, bad_bytes: bytes) -> None:
    async with running_broker(tmp_path, {"socket.request.max.bytes": "1024"}) as server:
        bystander = await connect(server)
        await api_versions_ok(bystander)
        offender = await connect(server)
        await offender.send_raw(bad_bytes)
        await assert_closed(offender)
        await api_versions_ok(bystander)
        fresh = await connect(server)
        await api_versions_ok(fresh)


async def test_an_unsupported_api_versions_version_gets_a_v0_answer_with_error_35(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        await conn.send_raw(raw_frame(18, 127, 42, b"\x01\x02garbage", flexible=True))
        with trio.fail_after(5):
            frame = await conn.receive_frame()
        correlation_id, body = decode_response(18, 0, frame)
        assert correlation_id == 42
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
        # Header v0: the body starts right after the correlation id.
        assert frame[4:6] == struct.pack(">h", 35)


async def test_invalid_client_software_name_gets_invalid_request(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        response = await conn.request(
            ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"), 3
        )
        assert response.error_code == ErrorCode.INVALID_REQUEST
        assert response.api_keys == ()


async def test_api_versions_v3_records_the_client_software(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"num.network.threads": "1"}) as server:
        conn = await connect(server)
        await conn.request(
            ApiVersionsRequest(client_software_name="my-client", client_software_version="2.5.0"), 3
        )
        (processor,) = server.socket_server.processors["PLAINTEXT"]
        (connection,) = processor.connections.values()
        assert connection.client_information.software_name == "my-client"
        assert connection.client_information.software_version == "2.5.0"


async def test_api_versions_advertises_exactly_what_the_handlers_implement(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        response = await conn.request(ApiVersionsRequest(), 0)
        advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert advertised == server.apis.supported_versions()
        assert advertised[18] == (0, 4)


async def test_a_handler_that_raises_answers_with_an_error_and_keeps_serving(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"num.io.threads": "1"}) as server:
        gated = gate_metadata(server)
        gated.fail_next = True
        conn = await connect(server)
        response = await conn.request(MetadataRequest(topics=(_topic("t"),)), 9)
        assert [t.error_code for t in response.topics] == [ErrorCode.UNKNOWN_SERVER_ERROR]
        await api_versions_ok(conn)
        again = await conn.request(MetadataRequest(topics=None), 9)
        assert again.brokers


def _topic(name: str) -> MetadataRequestTopic:
    return MetadataRequestTopic(name=name)


# -- quotas, idle expiry and the memory pool ---------------------------------------


async def test_max_connections_makes_the_acceptor_wait_for_a_free_slot(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"max.connections": "2"}) as server:
        first = await connect(server)
        second = await connect(server)
        await api_versions_ok(first)
        await api_versions_ok(second)
        third = await connect(server)
        await third.send(ApiVersionsRequest(), 0)
        assert await no_response_within(third, 0.5)
        await first.aclose()
        with trio.fail_after(5):
            await third.receive()


async def test_listener_max_connections_makes_the_acceptor_wait(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"listener.name.plaintext.max.connections": "1"}) as server:
        first = await connect(server)
        await api_versions_ok(first)
        second = await connect(server)
        await second.send(ApiVersionsRequest(), 0)
        assert await no_response_within(second, 0.5)
        await first.aclose()
        with trio.fail_after(5):
            await second.receive()


async def test_max_connections_per_ip_closes_the_excess_connection_at_once(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"max.connections.per.ip": "1"}) as server:
        first = await connect(server)
        await api_versions_ok(first)
        second = await connect(server)
        await assert_closed(second)
        await api_versions_ok(first)


async def test_max_connections_per_ip_overrides_win(tmp_path: Path) -> None:
    overrides = {"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:2"}
    async with running_broker(tmp_path, overrides) as server:
        first, second = await connect(server), await connect(server)
        await api_versions_ok(first)
        await api_versions_ok(second)
        third = await connect(server)
        await assert_closed(third)


async def test_connection_counts_return_to_zero_after_every_close(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"socket.request.max.bytes": "1024"}) as server:
        quotas = server.socket_server.quotas
        conns = [await connect(server) for _ in range(4)]
        for conn in conns:
            await api_versions_ok(conn)
        assert quotas.total_count() == 4
        await conns[0].aclose()
        await conns[1].send_raw(struct.pack(">i", -1))
        await conns[2].send_raw(raw_frame(999, 0, 1))
        await wait_until(lambda: quotas.total_count() == 1)
        await conns[3].aclose()
        await wait_until(lambda: quotas.total_count() == 0)
        assert quotas.ip_count("127.0.0.1") == 0


async def test_connection_creation_rate_slows_the_acceptor_down(tmp_path: Path) -> None:
    async with running_broker(
        tmp_path, {"max.connection.creation.rate": "4", "quota.window.num": "2"}
    ) as server:
        started = trio.current_time()
        conns = []
        for _ in range(12):
            conn = await connect(server)
            await api_versions_ok(conn)
            conns.append(conn)
        # 12 connections at 4/s cannot all be admitted in under a second.
        assert trio.current_time() - started >= 1.0


async def test_idle_connections_are_closed(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """connections.max.idle.ms on Trio's clock: the idle connection closes once the
    timeout has passed since its last response, the busy one never."""
    at_real_speed(mock_clock)
    async with running_broker(tmp_path, {"connections.max.idle.ms": "300"}) as server:
        autojump(mock_clock)
        idle = await connect(server)
        await api_versions_ok(idle)
        answered = trio.current_time()
        await assert_closed(idle, timeout_s=5)
        assert trio.current_time() - answered >= 0.3 - 1e-9
        busy = await connect(server)
        for _ in range(6):
            await api_versions_ok(busy)
            await trio.sleep(0.1)
        await api_versions_ok(busy)
        at_real_speed(mock_clock)


async def test_an_exhausted_memory_pool_stops_reading_until_memory_is_freed(tmp_path: Path) -> None:
    overrides = {
        "queued.max.request.bytes": "2048",
        "socket.request.max.bytes": "2048",
        "num.io.threads": "4",
    }
    async with running_broker(tmp_path, overrides) as server:
        gated = gate_metadata(server)
        pool = server.socket_server.memory_pool
        padding = tuple(_topic("t" * 200) for _ in range(4))
        # Two ~850-byte requests leave too little of a 2 KiB pool for a third (its
        # last 10% is kept for small requests, and grants are strict).
        holders = [await connect(server, client_id=SLOW) for _ in range(2)]
        for holder in holders:
            await holder.send(MetadataRequest(topics=padding), 9)
        await wait_until(lambda: gated.waiting == 2)
        starved = await connect(server)
        await starved.send(MetadataRequest(topics=padding), 9)
        await wait_until(lambda: pool.waiting == 1)
        assert await no_response_within(starved, 0.5)
        gated.gate.set()
        with trio.fail_after(5):
            await starved.receive()
            for holder in holders:
                await holder.receive()
        await wait_until(lambda: pool.used == 0)


# -- throttling ---------------------------------------------------------------------


class ThrottledMetadata(GatedMetadata):
    """Metadata whose responses carry a throttle time, as a quota manager would set."""

    async def handle(self, request: Request) -> Any:
        response = await super().handle(request)
        return response._replace(throttle_time_ms=400)


async def test_a_throttled_connection_stays_muted_for_the_throttle_time(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        server.apis.add_handler(ThrottledMetadata(server.metadata))
        conn = await connect(server)
        throttled = await conn.send(MetadataRequest(topics=None), 9)
        follower = await conn.send(ApiVersionsRequest(), 0)
        with trio.fail_after(5):
            correlation_id, response = await conn.receive()
        assert (correlation_id, response.throttle_time_ms) == (throttled, 400)
        answered_at = trio.current_time()
        with trio.fail_after(5):
            assert (await conn.receive())[0] == follower
        # KIP-219: the response goes out at once, then the channel stays muted.
        assert trio.current_time() - answered_at >= 0.3


# -- lifecycle ----------------------------------------------------------------------


async def test_graceful_shutdown_answers_in_flight_requests(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        gated = gate_metadata(server)
        conn = await connect(server, client_id=SLOW)
        in_flight = await conn.send(MetadataRequest(topics=None), 9)
        await wait_until(lambda: gated.waiting == 1)
        port = server.bound_port()
        server.shutdown()
        await trio.sleep(0.2)
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", port)
        gated.gate.set()
        with trio.fail_after(5):
            assert (await conn.receive())[0] == in_flight
        await assert_closed(conn)
        with trio.fail_after(10):
            await server.stopped.wait()


async def test_resizing_threads_under_load_loses_no_request(tmp_path: Path) -> None:
    async with running_broker(
        tmp_path, {"num.network.threads": "2", "num.io.threads": "2"}
    ) as server:
        answered: list[int] = []
        requests_per_client = 150

        async def client(index: int) -> None:
            done = 0
            conn = await connect(server)
            while done < requests_per_client:
                try:
                    await conn.request(ApiVersionsRequest(), 2)
                except (ConnectionClosed, trio.BrokenResourceError):
                    await conn.aclose()
                    conn = await connect(server)
                    continue
                done += 1
            answered.append(done)
            await conn.aclose()

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in range(8):
                    nursery.start_soon(client, i)
                for network, io in ((4, 4), (2, 2), (3, 3), (2, 2)):
                    await trio.sleep(0.1)
                    await server.resize_network_threads(network)
                    server.resize_io_threads(io)
                    assert len(server.socket_server.processors["PLAINTEXT"]) == network
                    assert server.data_handlers.size == io
        assert answered == [requests_per_client] * 8


async def test_resize_outside_half_to_double_is_rejected(tmp_path: Path) -> None:
    from broker.config import ConfigError

    async with running_broker(
        tmp_path, {"num.network.threads": "2", "num.io.threads": "4"}
    ) as server:
        with pytest.raises(ConfigError):
            await server.resize_network_threads(5)
        with pytest.raises(ConfigError):
            server.resize_io_threads(1)


async def test_the_control_plane_answers_while_the_data_plane_is_saturated(tmp_path: Path) -> None:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:PLAINTEXT",
        "control.plane.listener.name": "CONTROL",
        "queued.max.requests": "1",
        "num.io.threads": "1",
    }
    async with running_broker(tmp_path, overrides) as server:
        gated = gate_metadata(server)
        channel = server.socket_server.data_channel
        busy = [await connect(server, "PLAINTEXT", client_id=SLOW) for _ in range(2)]
        for conn in busy:
            await conn.send(MetadataRequest(topics=None), 9)
        await wait_until(lambda: gated.waiting == 1 and channel.request_queue_size() == 1)
        data = await connect(server, "PLAINTEXT")
        await data.send(ApiVersionsRequest(), 0)
        control = await connect(server, "CONTROL")
        await api_versions_ok(control)
        metadata = await control.request(MetadataRequest(topics=None), 9)
        assert metadata.brokers[0].port == server.bound_port("CONTROL")
        assert await no_response_within(data, 0.2)
        gated.gate.set()
        with trio.fail_after(5):
            await data.receive()


async def test_metadata_advertises_the_listener_the_request_came_in_on(tmp_path: Path) -> None:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "advertised.listeners": "PLAINTEXT://internal.example:9092,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
    }
    async with running_broker(tmp_path, overrides) as server:
        internal = await connect(server, "PLAINTEXT")
        external = await connect(server, "EXTERNAL")
        a = await internal.request(MetadataRequest(topics=None), 12)
        b = await external.request(MetadataRequest(topics=None), 12)
        assert [(x.host, x.port) for x in a.brokers] == [("internal.example", 9092)]
        assert [(x.host, x.port) for x in b.brokers] == [
            ("127.0.0.1", server.bound_port("EXTERNAL"))
        ]
        assert a.cluster_id == b.cluster_id == server.cluster_id
        assert a.controller_id == server.node_id


async def test_the_cluster_id_survives_a_restart(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        first = server.cluster_id
    async with running_broker(tmp_path) as server:
        assert server.cluster_id == first


async def test_a_wildcard_listener_binds_all_interfaces(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"listeners": "PLAINTEXT://:0"}) as server:
        conn = await KafkaConnection.connect("127.0.0.1", server.bound_port())
        await api_versions_ok(conn)
        host, _ = server.socket_server.advertised_endpoint("PLAINTEXT")
        assert host == socket.getfqdn()


async def test_a_protected_listener_admits_past_max_connections_and_an_excess_one_is_closed(
    tmp_path: Path,
) -> None:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": "2",
    }
    async with running_broker(tmp_path, overrides) as server:
        oldest = await connect(server, "PLAINTEXT")
        await api_versions_ok(oldest)
        newest = await connect(server, "PLAINTEXT")
        await api_versions_ok(newest)
        await api_versions_ok(newest)
        inter_broker = await connect(server, "INTERNAL")
        await api_versions_ok(inter_broker)
        # The least recently active client connection makes room (spec §3.5).
        await assert_closed(oldest)
        await api_versions_ok(newest)
        await api_versions_ok(inter_broker)
        await wait_until(lambda: server.socket_server.quotas.total_count() == 2)


async def test_an_ipv6_listener_serves_and_advertises_its_address(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"listeners": "PLAINTEXT://[::1]:0"}) as server:
        conn = await KafkaConnection.connect("::1", server.bound_port())
        await api_versions_ok(conn)
        metadata = await conn.request(MetadataRequest(topics=None), 12)
        assert [(b.host, b.port) for b in metadata.brokers] == [("::1", server.bound_port())]


async def test_the_request_log_writes_one_json_line_per_completed_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    caplog.set_level(logging.DEBUG, logger="kafka.request.logger")
    async with running_broker(tmp_path) as server:
        conn = await connect(server, client_id="logged-client")
        await conn.request(
            ApiVersionsRequest(client_software_name="my-client", client_software_version="1.0"), 3
        )
        await conn.request(MetadataRequest(topics=None), 12)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.request.logger"]
    assert len(lines) == 2
    entries = [json.loads(line.removeprefix("Completed request:")) for line in lines]
    assert [e["requestHeader"]["requestApiKeyName"] for e in entries] == ["ApiVersions", "Metadata"]
    first, second = entries
    assert first["requestHeader"]["clientId"] == "logged-client"
    assert second["clientInformation"] == {"softwareName": "my-client", "softwareVersion": "1.0"}
    assert second["listener"] == "PLAINTEXT" and second["securityProtocol"] == "PLAINTEXT"
    assert second["response"]["brokers"][0]["port"] == server.bound_port()
    for key in ("totalTimeMs", "requestQueueTimeMs", "localTimeMs", "sendTimeMs"):
        assert second[key] >= 0


async def test_connection_meters_count_creations_and_closes(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"num.network.threads": "1"}) as server:
        (processor,) = server.socket_server.processors["PLAINTEXT"]
        conns = [await connect(server) for _ in range(3)]
        for conn in conns:
            await api_versions_ok(conn)
        await conns[0].aclose()
        await wait_until(lambda: processor.connections_closed.count == 1)
        assert processor.connections_created.count == 3
        meter = server.metrics.get(
            "kafka.server",
            "socket-server-metrics",
            "connection-creation",
            listener="PLAINTEXT",
            networkProcessor=str(processor.id),
        )
        assert meter is processor.connections_created
