"""A blocking connection on our codec, for Spark's Python workers.

PySpark calls a reader's ``read()`` as a plain generator and a writer's
``write()`` synchronously, so the executors talk to the broker over an
ordinary socket rather than through Trio: a generator can then fetch, yield a
batch and fetch again without holding a whole offset range in memory.
"""

from __future__ import annotations

import itertools
import socket
import ssl
from typing import Any

from broker.protocol.api import RequestHeader, decode_response, encode_request
from broker.protocol.framing import Frame, FrameDecoder

# Responses are as large as the broker makes them (a Fetch's max_bytes); no cap here.
_MAX_RESPONSE = 2**31 - 1


class ConnectionClosed(Exception):
    """The broker closed the connection before answering."""


class BlockingConnection:
    """One TCP connection to a broker; one request in flight at a time."""

    def __init__(self, sock: socket.socket, client_id: str = "trio-kafka-pipeline") -> None:
        self._sock = sock
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._decoder = FrameDecoder(_MAX_RESPONSE)

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        timeout_s: float = 30.0,
        client_id: str = "trio-kafka-pipeline",
        ssl_context: ssl.SSLContext | None = None,
    ) -> BlockingConnection:
        """A TCP connection, wrapped in TLS (handshake included) when given a context."""
        sock = socket.create_connection((host, port), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        return cls(sock, client_id)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def request(self, body: Any, version: int) -> Any:
        """Send one request and return its decoded response body."""
        api_key = int(body.API_KEY)
        cid = next(self._correlation)
        header = RequestHeader(
            api_key=api_key, api_version=version, correlation_id=cid, client_id=self.client_id
        )
        self._sock.sendall(b"".join(bytes(chunk) for chunk in encode_request(header, body)))
        frame = self._receive_frame()
        correlation_id, response = decode_response(api_key, version, frame)
        if correlation_id != cid:
            raise ValueError(f"response correlation id {correlation_id}, expected {cid}")
        return response

    def _receive_frame(self) -> Frame:
        decoder = self._decoder
        while (frame := decoder.next_frame()) is None:
            data = self._sock.recv(decoder.read_size())
            if not data:
                raise ConnectionClosed("connection closed by the broker")
            decoder.feed(data)
        return frame
