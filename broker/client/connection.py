"""A minimal Kafka client connection on our own codec and Trio.

Used by the test client, the benchmarks and the pipeline. It speaks to one
broker over one socket, matching responses to requests by correlation id, so
requests may be pipelined: `send()` several, then `receive()` them in order.
"""

from __future__ import annotations

import itertools
import os
import socket
import ssl
from collections import deque
from typing import Any

import trio

from broker.protocol.api import (
    RequestHeader,
    decode_response,
    encode_request,
)
from broker.protocol.frame_buffers import FrameBuffers
from broker.protocol.framing import Frame, FrameDecoder

# Responses are as large as the broker makes them (a Fetch's max_bytes); no cap here.
_MAX_RESPONSE = 2**31 - 1
MAX_FRAME_READ = 1 << 20
"""The most of a large frame read at once, and waited for whole (SO_RCVLOWAT)."""


class ConnectionClosed(Exception):
    """The broker closed the connection before answering."""


class KafkaConnection:
    """One TCP connection to a broker; not safe for concurrent use by several tasks."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        client_id: str | None = "trio-kafka-client",
        frame_buffers: FrameBuffers | None = None,
    ) -> None:
        """`frame_buffers`: where large responses are received, reused once nothing
        holds the last one (a replica fetcher's: a fresh buffer per answer is zeroed
        first, a pass over every replicated byte)."""
        self.stream = stream
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._pending: deque[tuple[int, int, int]] = deque()
        self._decoder = FrameDecoder(_MAX_RESPONSE, frame_buffers)
        # Responses of requests cancelled while waiting, still to be read and dropped.
        self._abandoned = 0
        # The socket's SO_RCVLOWAT as last set (1: the kernel's default).
        self._low_water = 1

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        client_id: str | None = "trio-kafka-client",
        ssl_context: ssl.SSLContext | None = None,
        frame_buffers: FrameBuffers | None = None,
    ) -> KafkaConnection:
        """A TCP connection, over TLS when given a context (the handshake done here, so
        certificate errors surface at connect time; the host name is checked against the
        broker's certificate when the context says so)."""
        tcp = await trio.open_tcp_stream(host, port)
        if ssl_context is None:
            return cls(tcp, client_id, frame_buffers)
        # https_compatible: a broker closing without close_notify is an ordinary close.
        stream = trio.SSLStream(tcp, ssl_context, server_hostname=host, https_compatible=True)
        try:
            await stream.do_handshake()
        except BaseException:
            await tcp.aclose()
            raise
        return cls(stream, client_id, frame_buffers)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def request(self, body: Any, version: int) -> Any:
        """Send one request and return its decoded response body. A request cancelled
        while it waited leaves its answer on the way: the next request reads it first."""
        while self._abandoned:
            await self.receive()
            self._abandoned -= 1
        await self.send(body, version)
        try:
            _, response = await self.receive()
        except trio.Cancelled:
            self._abandoned += 1
            raise
        return response

    async def send(self, body: Any, version: int, correlation_id: int | None = None) -> int:
        """Write a request; returns its correlation id."""
        api_key = int(body.API_KEY)
        cid = next(self._correlation) if correlation_id is None else correlation_id
        header = RequestHeader(
            api_key=api_key,
            api_version=version,
            correlation_id=cid,
            client_id=self.client_id,
        )
        chunks = encode_request(header, body)
        await self.stream.send_all(b"".join(chunks))
        self._pending.append((cid, api_key, version))
        return cid

    async def send_raw(self, frame: bytes) -> None:
        """Write bytes as they are (for tests of bad input)."""
        await self.stream.send_all(frame)

    async def receive(self) -> tuple[int, Any]:
        """The next response, decoded with the api key and version of its request."""
        frame = await self._receive_view()
        cid, api_key, version = self._pending.popleft()
        correlation_id, body = decode_response(api_key, version, frame)
        if correlation_id != cid:
            raise ValueError(f"response correlation id {correlation_id}, expected {cid}")
        return correlation_id, body

    async def receive_frame(self) -> bytes:
        """One size-prefixed frame's payload; ConnectionClosed at end of stream."""
        frame = await self._receive_view()
        return frame if isinstance(frame, bytes) else bytes(frame)

    async def _receive_view(self) -> Frame:
        """One frame's payload as the decoder hands it out: a large one is a view of its
        own buffer, never reused while anything references it, so the decoded response may
        keep slices of it (a follower's Fetch answer goes to its log without a copy). Over
        plain TCP a large frame is received straight into that buffer."""
        decoder = self._decoder
        while (frame := decoder.next_frame()) is None:
            space = decoder.frame_space(MAX_FRAME_READ)
            if space is not None and isinstance(self.stream, trio.SocketStream):
                count = await self._receive_rest(self.stream.socket, space)
                if not count:
                    raise ConnectionClosed("connection closed by the broker")
                decoder.advance(count)
                continue
            self._receive_low_water(1)
            data = await self.stream.receive_some(decoder.read_size())
            if not data:
                raise ConnectionClosed("connection closed by the broker")
            decoder.feed(data)
        return frame

    async def _receive_rest(self, sock: trio.socket.SocketType, space: memoryview) -> int:
        """Bytes of a large frame read into its buffer, woken only once `space` is full
        (SO_RCVLOWAT; the kernel also wakes at the end of stream, an error or a window
        too small to fill it): a follower's Fetch answer of 1 MiB arrives over loopback
        in segments of 64 KiB, and each wake-up and read of a part cost the scheduler a
        trip and the fetcher a pass through Trio's socket wrapper; 0 at end of stream."""
        self._receive_low_water(len(space))
        fd = sock.fileno()
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                return os.readv(fd, (space,))
            except BlockingIOError:
                continue
            except OSError as exc:  # as SocketStream.receive_some reports it
                raise trio.BrokenResourceError(str(exc)) from exc

    def _receive_low_water(self, size: int) -> None:
        """Wake up for this socket once `size` bytes are there (changed only when it
        differs: one setsockopt per large frame and one after it)."""
        if size == self._low_water or not isinstance(self.stream, trio.SocketStream):
            return
        try:
            self.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, size)
        except OSError:  # closed: the read that follows reports it
            return
        self._low_water = size
