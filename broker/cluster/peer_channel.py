"""The private channel between the processes of a cluster: Kafka's inter-broker
requests (WriteTxnMarkers, and AddPartitionsToTxn v4 verify-only for KIP-890's
produce verification) over a Unix socket per process.

Kafka's brokers send these over the inter-broker listener,
authenticated as a broker principal that holds CLUSTER_ACTION. Our processes
share a host, so they use Unix sockets in a directory only the broker's user
can enter (`tempfile.mkdtemp`, mode 0700, made by the supervisor and named in
the metadata store): reaching the socket is the authentication, whatever the
listeners' security protocols and ACLs are, and no credentials need
configuring. Requests arriving here carry `PEER_LISTENER` as their listener,
which the handlers take as the cluster's own principal. Only the handlers the
server is given are served; anything else closes the connection.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import trio

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.errors import KafkaError
from broker.handlers.api_handler import ApiHandler
from broker.handlers.write_txn_markers import PEER_LISTENER
from broker.net.request import ClientInformation, Request, RequestContext
from broker.protocol.api import decode_request, decode_request_header, encode_response
from broker.protocol.framing import FrameDecoder
from broker.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 16 * 1024 * 1024
REQUEST_TIMEOUT_S = 10.0
PEER_PRINCIPAL = "User:__cluster"
WRITE_TXN_MARKERS_VERSION = 1


def socket_path(socket_dir: Path, node_id: int) -> Path:
    return socket_dir / f"node-{node_id}.sock"


class PeerUnavailable(Exception):
    """The process could not be reached or did not answer (it may be restarting)."""


class PeerServer:
    """Serves this process's socket (a broker `Service`)."""

    def __init__(self, path: Path, *handlers: ApiHandler) -> None:
        self.path = path
        self._handlers = {int(h.api_key): h for h in handlers}
        self._connections = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.path.unlink(missing_ok=True)  # left by a killed predecessor
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(str(self.path))
        sock.listen(64)
        listener = trio.SocketListener(sock)
        try:
            task_status.started()
            await trio.serve_listeners(self._serve, [listener])
        finally:
            self.path.unlink(missing_ok=True)

    async def _serve(self, stream: trio.SocketStream) -> None:
        self._connections += 1
        connection_id = f"peer-{self._connections}"
        decoder = FrameDecoder(MAX_FRAME_BYTES)
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                while True:
                    frame = decoder.next_frame()
                    if frame is None:
                        data = await stream.receive_some(decoder.read_size())
                        if not data:
                            return
                        decoder.feed(data)
                        continue
                    response = await self._answer(connection_id, bytes(frame))
                    if response is None:
                        return
                    await stream.send_all(response)

    async def _answer(self, connection_id: str, frame: bytes) -> bytes | None:
        try:
            header, offset = decode_request_header(frame)
            handler = self._handlers.get(header.api_key)
            if handler is None or not (
                handler.min_version <= header.api_version <= handler.max_version
            ):
                log.warning(
                    "peer channel: api key %d v%d is not served here",
                    header.api_key,
                    header.api_version,
                )
                return None
            body = decode_request(header, frame, offset)
        except Exception as exc:  # a peer of another version, or garbage: close
            log.warning("peer channel: cannot decode a request: %s", exc)
            return None
        context = RequestContext(
            connection_id=connection_id,
            processor_id=-1,
            listener_name=PEER_LISTENER,
            security_protocol="PLAINTEXT",
            client_address="127.0.0.1",
            client_port=0,
            client_information=ClientInformation(),
            principal=PEER_PRINCIPAL,
        )
        request = Request(header=header, body=body, context=context, size_bytes=len(frame))
        result = await handler.handle(request)
        chunks = encode_response(header.api_key, header.api_version, header.correlation_id, result)
        return b"".join(chunks)


class PeerClient:
    """Sends requests to the other processes, one connection each (requests to one
    process take turns), opened on first use and again after a failure."""

    def __init__(self, socket_dir: Path, node_id: int) -> None:
        self.socket_dir = socket_dir
        self._client_id = f"broker-{node_id}"
        self._connections: dict[int, KafkaConnection] = {}
        self._locks: dict[int, trio.Lock] = {}

    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        response: WriteTxnMarkersResponse = await self.request(
            node, request, WRITE_TXN_MARKERS_VERSION
        )
        return response

    async def request(
        self, node: int, body: Any, version: int, *, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> Any:
        """PeerUnavailable when the process cannot be reached or does not answer within
        `timeout_s` (waiting for the connection's turn included)."""
        lock = self._locks.setdefault(node, trio.Lock())
        try:
            with trio.fail_after(timeout_s):
                async with lock:
                    return await self._request_locked(node, body, version)
        except trio.TooSlowError as exc:
            raise PeerUnavailable(f"node {node}: no answer in {timeout_s} s") from exc

    async def _request_locked(self, node: int, body: Any, version: int) -> Any:
        answered = False
        try:
            connection = self._connections.get(node)
            if connection is None:
                stream = await trio.open_unix_socket(str(socket_path(self.socket_dir, node)))
                connection = KafkaConnection(stream, self._client_id)
                self._connections[node] = connection
            response = await connection.request(body, version)
            answered = True
            return response
        except (
            OSError,
            ConnectionClosed,
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            KafkaError,
            ValueError,
        ) as exc:
            raise PeerUnavailable(f"node {node}: {exc!r}") from exc
        finally:
            if not answered:  # failed or cancelled mid-request: its answer may still come
                dropped = self._connections.pop(node, None)
                if dropped is not None:
                    with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await dropped.aclose()

    async def aclose(self) -> None:
        for connection in self._connections.values():
            with contextlib.suppress(Exception):
                await connection.aclose()
        self._connections.clear()
