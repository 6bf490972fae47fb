"""Issue 22 item 1: frames of 16 MiB and more are read into reused mappings.

Under a flood of pool-sized frames each frame used to get a fresh anonymous mapping: the
kernel faulted in and zeroed every page of it and unmapped it after its answer, about
40 ms of CPU per 50 MB frame that every other client waited for on 2 cores. Now an
answered frame's mapping is kept for the next one waiting for the memory pool's bytes,
and given back after the flood. The broker runs in this Trio run; the frames are sent from plain threads.
"""

from __future__ import annotations

from pathlib import Path

import trio

from bench import hostile_clients as hc
from broker.protocol.framing import MAPPED_FRAME
from tests.integration.broker_harness import running_broker
from tests.integration.test_flood_loop_rounds import send_frames
from tests.waiting import wait_until

FRAME_BYTES = MAPPED_FRAME + (1 << 20)
SENDERS = 2
FRAMES_EACH = 3
WAIT_S = 60.0


async def test_large_frames_are_read_into_reused_mappings_within_the_pool(
    tmp_path: Path,
) -> None:
    # A pool one frame fits: the senders' frames are admitted one at a time.
    pool_bytes = FRAME_BYTES + (1 << 20)
    overrides = {
        "queued.max.request.bytes": str(pool_bytes),
        "socket.request.max.bytes": str(pool_bytes),
    }
    async with running_broker(tmp_path, overrides) as server:
        port = server.bound_port(None)
        await hc.create_topic(port, "big")
        # One record larger than message.max.bytes: refused, as the bench's flood is.
        frame = hc.large_produce_frame("big", FRAME_BYTES)
        answers: list[bytes] = []
        pool = server.socket_server.memory_pool
        with trio.fail_after(WAIT_S):
            async with trio.open_nursery() as nursery:
                for _ in range(SENDERS):
                    nursery.start_soon(
                        trio.to_thread.run_sync, send_frames, port, frame, FRAMES_EACH, answers
                    )
            await wait_until(lambda: pool.available == pool.size, WAIT_S)
        buffers = pool.frame_buffers
        # Every frame but the first could take its predecessor's mapping; a worker
        # thread slow to let go of one (validating its batch) may cost a fresh one.
        assert 1 <= buffers.mapped <= SENDERS * FRAMES_EACH // 2
        # Kept only while another frame waited: after the flood, all given back.
        buffers.sweep()
        assert buffers.idle_large == 0 and buffers.held_bytes == 0
    assert len(answers) == SENDERS * FRAMES_EACH
