"""Issue 22 item 1: a pool-sized frame never holds the event loop for a long stretch.

Every other connection waits for the scheduler round in progress, so the round is what a
bystander pays. A Produce of one 48 MiB batch (a frame of its own mapping) used to hold
the loop for one round validating the batch (its CRC and record walk) and for another
unmapping the frame's mapping: its longest round took 37-38 ms of CPU; now both run in
worker threads and the frame is read in bulk turns of a few hundred microseconds (its
longest round 0.6 ms). The broker
runs in this Trio run; the frame is sent from a plain thread, so that only the broker's
work is on the loop.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import trio

from bench import hostile_clients as hc
from broker.protocol.framing import MAPPED_FRAME
from tests.integration.broker_harness import running_broker
from tests.waiting import wait_until

FRAME_BYTES = 3 * MAPPED_FRAME
FRAMES = 2
LONGEST_ROUND_S = 0.005
"""Rounds measured in the loop thread's CPU time (not wall time, which a loaded machine
stretches)."""
WAIT_S = 60.0


class RoundTimer(trio.abc.Instrument):
    """The loop thread's CPU time of each scheduler round (from the end of one I/O poll
    to the start of the next: every task step and the scheduler's own work between)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.longest = 0.0
        self.measuring = False

    def after_io_wait(self, timeout: float) -> None:
        self.started = time.thread_time()

    def before_io_wait(self, timeout: float) -> None:
        if self.measuring and self.started is not None:
            self.longest = max(self.longest, time.thread_time() - self.started)


def send_frames(port: int, frame: bytes, count: int, answers: list[bytes]) -> None:
    """Send `frame` `count` times on one connection, each after the previous answer."""
    with socket.create_connection(("127.0.0.1", port)) as sock, sock.makefile("rb") as stream:
        for _ in range(count):
            sock.sendall(frame)
            size = int.from_bytes(stream.read(4), "big")
            answers.append(stream.read(size))


async def test_a_pool_sized_batch_is_appended_without_a_long_scheduler_round(
    tmp_path: Path,
) -> None:
    overrides = {
        "queued.max.request.bytes": str(FRAME_BYTES + (1 << 20)),
        "socket.request.max.bytes": str(FRAME_BYTES + (1 << 20)),
        "message.max.bytes": str(FRAME_BYTES),
    }
    timer = RoundTimer()
    async with running_broker(tmp_path, overrides) as server:
        port = server.bound_port(None)
        await hc.create_topic(port, "big")
        frame = hc.large_produce_frame("big", FRAME_BYTES - (1 << 16))
        answers: list[bytes] = []
        trio.lowlevel.add_instrument(timer)
        timer.measuring = True
        try:
            with trio.fail_after(WAIT_S):
                await trio.to_thread.run_sync(send_frames, port, frame, FRAMES, answers)
                # Each frame's mapping is unmapped after its answer is written, then
                # its bytes go back to the pool.
                pool = server.socket_server.memory_pool
                await wait_until(lambda: pool.available == pool.size, WAIT_S)
        finally:
            timer.measuring = False
            trio.lowlevel.remove_instrument(timer)
        assert await hc.log_end_offset(port, "big") == FRAMES
    assert len(answers) == FRAMES
    assert 0 < timer.longest < LONGEST_ROUND_S, f"longest round {timer.longest * 1e3:.1f} ms"
