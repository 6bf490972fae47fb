"""A new connection's first bytes: read without waiting, and what they say about it."""

from __future__ import annotations

import socket
import struct

import pytest
import trio

from broker.net.first_bytes_waiter import FirstBytesWaiter
from broker.net.first_read import FirstBytes, classify, read_nowait
from broker.protocol.framing import FrameDecoder, InvalidFrameSize
from tests.waiting import wait_until


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    return a, b


def test_read_nowait_returns_what_has_arrived_without_waiting() -> None:
    ours, peer = pair()
    with ours, peer:
        assert read_nowait(ours.fileno(), 100) == (b"", False)
        peer.sendall(b"abc")
        assert read_nowait(ours.fileno(), 100) == (b"abc", False)
        peer.sendall(b"0123456789")
        assert read_nowait(ours.fileno(), 4) == (b"0123", False)
        assert read_nowait(ours.fileno(), 100) == (b"456789", False)


def test_read_nowait_reports_the_end_of_the_stream_with_the_last_bytes() -> None:
    ours, peer = pair()
    with ours:
        peer.sendall(b"last")
        peer.close()
        assert read_nowait(ours.fileno(), 100) == (b"last", True)


def test_a_whole_first_frame_is_a_frame_even_when_the_peer_hung_up() -> None:
    for eof in (False, True):
        decoder = FrameDecoder(1000)
        assert classify(decoder, frame(b"x" * 10) + b"\x00", eof) is FirstBytes.FRAME
        assert decoder.next_frame() == b"x" * 10
        assert decoder.buffered == 1  # the next frame's first byte stays


def test_part_of_a_frame_is_served_unless_the_peer_hung_up() -> None:
    partial = frame(b"x" * 10)[:7]
    assert classify(FrameDecoder(1000), partial, False) is FirstBytes.SERVE
    assert classify(FrameDecoder(1000), partial, True) is FirstBytes.HUNG_UP
    assert classify(FrameDecoder(1000), b"", False) is FirstBytes.SERVE
    assert classify(FrameDecoder(1000), b"", True) is FirstBytes.HUNG_UP


@pytest.mark.parametrize("size", [-1, 1001, 2**31 - 1])
def test_a_size_kafka_closes_for_is_refused_from_its_prefix_alone(size: int) -> None:
    with pytest.raises(InvalidFrameSize):
        classify(FrameDecoder(1000), struct.pack(">i", size), False)


async def test_the_waiter_hands_a_connection_back_once_it_has_bytes() -> None:
    ours, peer = pair()
    with ours, peer:
        waiter = FirstBytesWaiter[str](grace_s=30)
        ready: list[tuple[str, float]] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter.run, lambda item: ready.append((item, trio.current_time())))
            waiter.add(ours.fileno(), "conn")
            await trio.sleep(0.05)
            assert ready == [] and len(waiter) == 1
            peer.sendall(b"x")
            await wait_until(lambda: ready, interval_s=0.001)
            nursery.cancel_scope.cancel()
        assert [item for item, _ in ready] == ["conn"]
        assert len(waiter) == 0


async def test_the_waiter_hands_a_silent_connection_back_after_its_grace(
    autojump_clock: trio.abc.Clock,
) -> None:
    first, first_peer = pair()
    second, second_peer = pair()
    with first, first_peer, second, second_peer:
        waiter = FirstBytesWaiter[str](grace_s=0.2)
        ready: list[tuple[str, float]] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter.run, lambda item: ready.append((item, trio.current_time())))
            start = trio.current_time()
            waiter.add(first.fileno(), "first")
            await trio.sleep(0.1)
            waiter.add(second.fileno(), "second")
            await trio.sleep(1)
            nursery.cancel_scope.cancel()
        assert [item for item, _ in ready] == ["first", "second"]
        assert [round(at - start, 2) for _, at in ready] == [0.2, 0.3]


async def test_take_all_gives_back_every_waiting_item() -> None:
    ours, peer = pair()
    with ours, peer:
        waiter = FirstBytesWaiter[str]()
        waiter.add(ours.fileno(), "conn")
        assert waiter.take_all() == ["conn"]
        assert len(waiter) == 0
