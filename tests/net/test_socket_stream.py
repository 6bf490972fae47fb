"""The plain-socket Stream: ready bytes without a scheduler trip, reads into a buffer."""

from __future__ import annotations

import socket

import pytest
import trio

from broker.net.socket_stream import FastSocketStream, close_stream


async def send_later(peer: socket.socket, data: bytes) -> None:
    await trio.sleep(0.01)  # once the reader waits in Trio
    peer.sendall(data)


def pair() -> tuple[FastSocketStream, socket.socket]:
    ours, theirs = socket.socketpair()
    theirs.setblocking(True)
    return FastSocketStream(trio.socket.from_stdlib_socket(ours)), theirs


async def test_ready_bytes_are_read_and_missing_ones_awaited() -> None:
    stream, peer = pair()
    peer.sendall(b"ready")
    assert await stream.receive_some(100) == b"ready"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_later, peer, b"later")
        assert await stream.receive_some(100) == b"later"
    peer.close()
    assert await stream.receive_some(100) == b""
    await close_stream(stream)


async def test_a_frame_is_read_into_its_own_buffer() -> None:
    stream, peer = pair()
    buffer = bytearray(10)
    view = memoryview(buffer)
    peer.sendall(b"0123")
    assert await stream.receive_into(view) == 4
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_later, peer, b"456789")
        filled = 4
        while filled < 10:
            filled += await stream.receive_into(view[filled:])
    assert buffer == b"0123456789"
    assert stream.unread_bytes() == 0
    peer.sendall(b"xyz")
    await stream.wait_readable()
    assert stream.unread_bytes() == 3
    peer.close()
    stream.close_now()


async def test_a_write_larger_than_the_socket_buffer_is_finished_by_trio() -> None:
    stream, peer = pair()
    data = bytes(range(256)) * 40_000  # far beyond a socket buffer
    received = bytearray()

    def drain() -> None:
        while len(received) < len(data):
            received.extend(peer.recv(1 << 20))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, drain)
        await stream.send_all(data)
    assert received == data
    peer.close()
    await close_stream(stream)


async def test_a_reset_peer_is_a_broken_stream() -> None:
    stream, peer = pair()
    peer.close()
    with pytest.raises(trio.BrokenResourceError):
        for _ in range(100):  # the first writes may still be buffered
            await stream.send_all(b"x" * 65536)
    stream.close_now()


async def test_a_detached_socket_outlives_the_stream() -> None:
    stream, peer = pair()
    sock = stream.detach()
    stream.close_now()  # closes nothing: the socket is no longer the stream's
    sock.send(b"still open")
    assert peer.recv(100) == b"still open"
    sock.close()
    peer.close()
