"""A replica fetcher's connection reads a large answer once it is all there (SO_RCVLOWAT),
not in every loopback segment as it arrives, and a small answer after it is not held
back by that mark."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from broker.client.connection import KafkaConnection
from broker.protocol.api import ApiKey, encode_response
from broker.protocol.frame_buffers import FrameBuffers
from broker.protocol.framing import FrameDecoder
from broker.protocol.messages import FetchRequest
from tests.client.test_reused_frame_buffers import VERSION, answer

LARGE = 600_000
PARTS = 6


async def answered(
    client: KafkaConnection, server: trio.SocketStream, records: bytes, parts: int
) -> bytes:
    """The records of one Fetch, sent by `server` in `parts` writes a moment apart."""
    cid = await client.send(FetchRequest(replica_id=1, max_wait_ms=0, topics=()), VERSION)
    await server.receive_some()
    frame = b"".join(encode_response(ApiKey.FETCH, VERSION, cid, answer(records)))
    step = -(-len(frame) // parts)

    async def send_in_parts() -> None:
        for start in range(0, len(frame), step):
            await server.send_all(frame[start : start + step])
            await trio.sleep(0.02)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_in_parts)
        with trio.fail_after(10):
            _, body = await client.receive()
    return bytes(body.responses[0].partitions[0].records)


def counting(reads: list[int], real: Callable[[FrameDecoder, int], None]) -> Callable[..., None]:
    def advance(decoder: FrameDecoder, count: int) -> None:
        reads.append(count)
        real(decoder, count)

    return advance


async def test_a_large_answer_is_read_once_whole_and_a_small_one_after_it_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    client = await KafkaConnection.connect(
        "127.0.0.1", port, "replica-fetcher", frame_buffers=FrameBuffers(keep_bytes=4 * LARGE)
    )
    server = await listener.accept()
    reads: list[int] = []
    monkeypatch.setattr(FrameDecoder, "advance", counting(reads, FrameDecoder.advance))
    for fill in (b"a", b"b"):
        reads.clear()
        assert await answered(client, server, fill * LARGE, PARTS) == fill * LARGE
        # Read straight into the frame once it is there (the start of it came with
        # the size prefix), where each part sent was a read and a wake-up of its own.
        assert len(reads) <= 2
    assert await answered(client, server, b"small", 1) == b"small"
    await client.aclose()
    await server.aclose()
    await listener.aclose()
