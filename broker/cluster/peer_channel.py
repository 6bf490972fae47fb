"""The private channel between the processes of a cluster: Kafka's inter-broker
requests (WriteTxnMarkers, and AddPartitionsToTxn v4 verify-only for KIP-890's
produce verification) over a Unix socket per process.

Kafka's brokers send these over the inter-broker listener,
authenticated as a broker principal that holds CLUSTER_ACTION. Our processes
share a host, so they use Unix sockets in a directory only the broker's user
can enter (`tempfile.mkdtemp`, mode 0700, made by the supervisor and named in
the metadata store): reaching the socket is the authentication, whatever the
listeners' security protocols and ACLs are, and no credentials need
configuring. The socket is an internal listener of the process's SocketServer
(broker/net/internal_listener.py), its requests answered by the same KafkaApis and
middleware as a client's, with the cluster principal (`User:__cluster`, allowed
CLUSTER_ACTION by the authorization middleware). Only `PEER_APIS` are served; anything
else closes the connection.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import trio

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.errors import KafkaError, PeerUnavailable
from broker.net.internal_listener import InternalListener
from broker.net.request import CLUSTER_PRINCIPAL
from broker.protocol.api import ApiKey
from broker.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
WRITE_TXN_MARKERS_VERSION = 1
PEER_LISTENER = "cluster-peers"
"""The internal listener's name (no configured listener can have it: listener names are
upper case)."""
PEER_APIS = frozenset({ApiKey.WRITE_TXN_MARKERS, ApiKey.ADD_PARTITIONS_TO_TXN})


def socket_path(socket_dir: Path, node_id: int) -> Path:
    return socket_dir / f"node-{node_id}.sock"


def peer_listener(socket_dir: Path, node_id: int) -> InternalListener:
    """This process's internal listener: served by its SocketServer and KafkaApis like
    the client listeners, its connections carrying the cluster principal."""
    return InternalListener(
        name=PEER_LISTENER,
        path=socket_path(socket_dir, node_id),
        principal=CLUSTER_PRINCIPAL,
        api_keys=PEER_APIS,
    )


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
