"""A peer's close always closes our side (issue 22, item 5).

A connection is not read while its request waits for an answer or its frame for pool
memory, so clients that closed during such a wait left sockets in CLOSE_WAIT: for as
long as a long-poll Fetch asked to wait (a mutated frame of the hostile-frame attack can
ask for weeks), so hundreds stayed until the broker stopped. Real sockets, bounded
counts; the broker's open sockets are counted in /proc/self/fd and by its connection
gauge, and must come back to their baseline within a bounded time.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import trio

from bench import hostile_clients as hc
from broker.server import KafkaServer
from tests.integration.broker_harness import running_broker
from tests.integration.test_socket_server import wait_until

TOPIC = "polled"
CLIENTS = 40
MIB = 1 << 20


def long_poll_frame(max_wait_ms: int = 600_000) -> bytes:
    """A Fetch that waits for 1 GiB of records: answered only after `max_wait_ms`."""
    fetch = hc.fetch_body(TOPIC, MIB)._replace(max_wait_ms=max_wait_ms, min_bytes=1 << 30)
    return hc.frame_of(fetch, 12)


def open_sockets() -> set[str]:
    """The sockets this process holds (the broker's and the test's own), by inode."""
    inodes = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:"):
            inodes.add(target)
    return inodes


def describe_sockets(inodes: set[str]) -> list[str]:
    """Local and remote address and TCP state of each socket (for a failure's message)."""
    wanted = {inode.removeprefix("socket:[").rstrip("]") for inode in inodes}
    found = []
    for table in ("tcp", "tcp6", "unix"):
        with open(f"/proc/self/net/{table}") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                inode = fields[9] if table != "unix" else fields[6]
                if inode in wanted:
                    found.append(f"{table} {' '.join(fields[1:4])} inode {inode}")
    return found


async def wait_for_sockets_left(baseline: set[str], expected: int) -> None:
    """Within 15 s, exactly `expected` sockets open that were not open at `baseline`
    (a socket of the baseline may close meanwhile: a client's, left to the collector)."""
    try:
        await wait_until(lambda: len(open_sockets() - baseline) == expected, timeout_s=15)
    except trio.TooSlowError:
        left = open_sockets() - baseline
        raise AssertionError(f"{len(left)} sockets left: {describe_sockets(left)}") from None


async def send_then_close(port: int, data: bytes, close: trio.Event) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(data)
    await close.wait()
    await stream.aclose()


async def attack(server: KafkaServer, data: bytes, waiting: Callable[[], int]) -> None:
    """CLIENTS connections send `data` and close once `waiting()` says all of them wait
    (registered and muted: a hang-up before that is screened out before registration)."""
    close = trio.Event()
    async with trio.open_nursery() as nursery:
        for _ in range(CLIENTS):
            nursery.start_soon(send_then_close, server.bound_port(), data, close)
        await wait_until(lambda: waiting() >= CLIENTS, timeout_s=15)
        close.set()


async def test_after_hostile_frames_and_long_polls_closed_by_their_clients_no_socket_is_left(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as server:
        port = server.bound_port()
        await hc.create_topic(port, TOPIC)
        await wait_until(lambda: server.socket_server.quotas.total_count() == 0)
        baseline = open_sockets()
        frames = hc.hostile_frames(TOPIC, seed=22, max_request_bytes=100 * MIB)
        await hc.send_hostile_frames(port, frames, 300, trio.current_time() + 3, 8, [0])
        await attack(server, long_poll_frame(), lambda: server.apis.deferred_waiting)
        await wait_until(lambda: server.socket_server.quotas.total_count() == 0, timeout_s=15)
        await wait_for_sockets_left(baseline, 0)


async def test_a_long_poll_whose_client_half_closes_is_answered_at_once(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server:
        await hc.create_topic(server.bound_port(), TOPIC)
        stream = await trio.open_tcp_stream("127.0.0.1", server.bound_port())
        await stream.send_all(long_poll_frame())
        await trio.sleep(0.1)
        await stream.send_eof()
        received = b""
        with trio.fail_after(10):  # the Fetch asked to wait 600 s
            while chunk := await stream.receive_some(65536):
                received += chunk
        await stream.aclose()
        (size,) = struct.unpack(">i", received[:4])
        assert len(received) == 4 + size, "one whole answer, then the broker closed"
        assert received[4:8] == long_poll_frame()[8:12], "the Fetch's correlation id"


async def test_frames_waiting_for_pool_memory_close_when_their_client_hangs_up(
    tmp_path: Path,
) -> None:
    overrides = {"queued.max.request.bytes": str(MIB), "socket.request.max.bytes": str(MIB)}
    async with running_broker(tmp_path, overrides) as server:
        port = server.bound_port()
        baseline = open_sockets()
        large = struct.pack(">i", 900 * 1024) + b"\0" * 64  # a large frame's first bytes
        holder = socket.create_connection(("127.0.0.1", port))
        try:
            holder.sendall(large)  # admitted, then never finished: holds the large lane
            pool = server.socket_server.memory_pool
            await wait_until(lambda: pool.used >= 900 * 1024)
            await attack(server, large, lambda: pool.waiting)
            await wait_until(lambda: server.socket_server.quotas.total_count() == 1, timeout_s=15)
            assert pool.waiting == 0
            await wait_for_sockets_left(baseline, 2)  # the holder's two ends
        finally:
            holder.close()
        await wait_until(lambda: server.socket_server.quotas.total_count() == 0)
