"""Writing responses: a response the socket cannot take at once still arrives whole.

The processor writes a one-chunk response straight to the socket and hands what the
kernel did not take to Trio; these tests hold both halves to the wire, with a client
that does not read until the broker's socket buffer is full.
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
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest, MetadataResponse
from broker.protocol.messages.metadata_response import (
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from tests.integration.broker_harness import connect, running_broker

TOPICS = 4000


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
