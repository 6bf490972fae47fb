"""Reads and writes on plain sockets, which the processor does with read(2)/write(2)
first and Trio only when the socket is not ready.

A response the socket cannot take at once still arrives whole (the kernel takes part,
Trio sends the rest); requests split over many reads, or many in one read, are all
answered, in order.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.client.connection import KafkaConnection
from broker.net.request import Request
from broker.protocol.api import RequestHeader, decode_response, encode_request
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest, MetadataResponse
from broker.protocol.messages.metadata_response import (
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from tests.integration.broker_harness import connect, running_broker

TOPICS = 4000


def request_bytes(body: Any, version: int, correlation_id: int) -> bytes:
    header = RequestHeader(
        api_key=body.API_KEY, api_version=version, correlation_id=correlation_id, client_id="t"
    )
    return b"".join(bytes(chunk) for chunk in encode_request(header, body))


def _large_metadata() -> MetadataResponse:
    partitions = tuple(
        MetadataResponsePartition(
            partition_index=p, leader_id=1, replica_nodes=(1,), isr_nodes=(1,)
        )
        for p in range(8)
    )
    return MetadataResponse(
        topics=tuple(
            MetadataResponseTopic(name=f"topic-{i:06d}", partitions=partitions)
            for i in range(TOPICS)
        )
    )


class LargeMetadata:
    """Metadata answered with the same large body (several MB when encoded)."""

    api_key = 3
    min_version = 0
    max_version = 12

    def __init__(self) -> None:
        self.body = _large_metadata()

    async def handle(self, request: Request) -> Any:
        return self.body

    def error_response(self, request: Request, error_code: int) -> Any:
        return MetadataResponse()


async def test_a_response_larger_than_the_socket_buffer_arrives_whole_and_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partial: list[tuple[int, int]] = []
    write = os.write

    def observed_write(fd: int, data: Any) -> int:
        # The real write, observed: the test must see the kernel take only part.
        sent = write(fd, data)
        if sent < len(data):
            partial.append((len(data), sent))
        return sent

    monkeypatch.setattr(os, "write", observed_write)
    async with running_broker(tmp_path) as server:
        handler = LargeMetadata()
        server.apis.add_handler(handler)
        slow = await connect(server)
        assert isinstance(slow.stream, trio.SocketStream)
        # A small, fixed receive buffer: the broker's first write can only be partial.
        slow.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        big_id = await slow.send(MetadataRequest(topics=None), 1)
        after_id = await slow.send(ApiVersionsRequest(), 0)
        await trio.sleep(0.3)
        # Meanwhile another connection is served at once.
        other = await connect(server)
        with trio.fail_after(5):
            assert (await other.request(ApiVersionsRequest(), 0)).error_code == 0
        with trio.fail_after(30):
            first_id, first = await slow.receive()
            second_id, _ = await slow.receive()
        assert (first_id, second_id) == (big_id, after_id)
        assert first.topics == handler.body.topics
        assert partial, "the large response was taken whole: the test exercised nothing"
        await slow.aclose()
        await other.aclose()


async def test_many_small_responses_arrive_in_order_on_one_connection(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn: KafkaConnection = await connect(server)
        with trio.fail_after(20):
            sent = [await conn.send(ApiVersionsRequest(), i % 4) for i in range(500)]
            received = [(await conn.receive())[0] for _ in sent]
        assert received == sent
        await conn.aclose()


async def test_a_request_sent_a_byte_at_a_time_is_answered(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        body = ApiVersionsRequest(client_software_name="tests", client_software_version="1.0")
        frame = request_bytes(body, 3, correlation_id=7)
        with trio.fail_after(20):
            for i in range(len(frame)):
                await conn.stream.send_all(frame[i : i + 1])
                await trio.sleep(0.001)
            correlation_id, response = decode_response(18, 3, await conn.receive_frame())
        assert correlation_id == 7
        assert response.error_code == 0
        await conn.aclose()


async def test_many_requests_in_one_write_are_all_answered_in_order(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        conn = await connect(server)
        ids = list(range(100, 160))
        frames = b"".join(request_bytes(ApiVersionsRequest(), 0, correlation_id=i) for i in ids)
        with trio.fail_after(20):
            await conn.stream.send_all(frames)
            received = [decode_response(18, 0, await conn.receive_frame())[0] for _ in ids]
        assert received == ids
        await conn.aclose()
