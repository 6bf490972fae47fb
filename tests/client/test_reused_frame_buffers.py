"""A connection given frame buffers (a replica fetcher's) receives large answers into
mappings reused from one answer to the next, and never into one a decoded answer still
holds: a follower's records go to its log as views of the frame."""

from __future__ import annotations

import trio

from broker.client.connection import KafkaConnection
from broker.protocol.api import ApiKey, encode_response
from broker.protocol.frame_buffers import POOLED_FRAME, FrameBuffers
from broker.protocol.messages import FetchRequest, FetchResponse
from broker.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData

VERSION = 12


def answer(records: bytes) -> FetchResponse:
    partition = PartitionData(
        partition_index=0,
        error_code=0,
        high_watermark=1,
        last_stable_offset=1,
        log_start_offset=0,
        records=records,
    )
    topic = FetchableTopicResponse(topic="orders", partitions=(partition,))
    return FetchResponse(error_code=0, session_id=0, responses=(topic,))


async def fetched(client: KafkaConnection, server: trio.SocketStream, records: bytes) -> bytes:
    """The records of one Fetch answered by `server` with `records`."""
    cid = await client.send(FetchRequest(replica_id=1, max_wait_ms=0, topics=()), VERSION)
    await server.receive_some()
    frame = b"".join(encode_response(ApiKey.FETCH, VERSION, cid, answer(records)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.send_all, frame)
        _, body = await client.receive()
    data = body.responses[0].partitions[0].records
    assert isinstance(data, memoryview)
    return data  # type: ignore[return-value]


async def test_large_answers_reuse_a_buffer_once_nothing_holds_the_last() -> None:
    left, right = trio.socket.socketpair()
    buffers = FrameBuffers(keep_bytes=4 * POOLED_FRAME)
    client = KafkaConnection(trio.SocketStream(left), "replica-fetcher", buffers)
    server = trio.SocketStream(right)
    size = 2 * POOLED_FRAME
    for fill in (b"a", b"b", b"c"):
        assert bytes(await fetched(client, server, fill * size)) == fill * size
    assert buffers.mapped == 1
    held = await fetched(client, server, b"d" * size)
    assert bytes(await fetched(client, server, b"e" * size)) == b"e" * size
    assert bytes(held) == b"d" * size  # not overwritten while held
    assert buffers.mapped == 2
    await client.aclose()
    await server.aclose()
