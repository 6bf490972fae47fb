"""A listener hands connections over with their first bytes (TCP_DEFER_ACCEPT, Linux),
and a connection that stays silent is handed over anyway, after about DEFER_ACCEPT_S."""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest
import trio

from broker.net.acceptor import DEFER_ACCEPT_S, bind_listener
from broker.net.endpoint import Endpoint

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="TCP_DEFER_ACCEPT is Linux's; elsewhere accept is plain"
)


async def _listener() -> trio.socket.SocketType:
    endpoint = Endpoint(
        listener_name="PLAINTEXT", security_protocol="PLAINTEXT", host="127.0.0.1", port=0
    )
    return await bind_listener(endpoint, backlog=50, receive_buffer_bytes=-1)


async def _connect(port: int) -> trio.socket.SocketType:
    client = trio.socket.socket()
    await client.connect(("127.0.0.1", port))
    return client


async def test_a_connection_reaches_accept_with_its_first_bytes() -> None:
    listener = await _listener()
    with listener:
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT) > 0
        port = listener.getsockname()[1]
        with await _connect(port) as client:
            with trio.move_on_after(0.3) as silent:
                await listener.accept()
            assert silent.cancelled_caught, "accepted before the client said anything"
            await client.send(b"\x00\x00\x00\x04ping")
            with trio.fail_after(5):
                accepted, _ = await listener.accept()
            with accepted:
                # The bytes came with it: a nonblocking read(2) finds them at once.
                assert os.read(accepted.fileno(), 64) == b"\x00\x00\x00\x04ping"


async def test_a_silent_connection_is_accepted_after_the_deferral() -> None:
    listener = await _listener()
    with listener:
        port = listener.getsockname()[1]
        with await _connect(port) as client:
            started = time.monotonic()
            with trio.fail_after(DEFER_ACCEPT_S + 5):
                accepted, _ = await listener.accept()
            waited = time.monotonic() - started
            with accepted:
                assert waited >= DEFER_ACCEPT_S / 2
                await client.send(b"late")
                assert await accepted.recv(64) == b"late"
