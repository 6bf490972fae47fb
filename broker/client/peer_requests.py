"""Inter-broker requests to other brokers (WriteTxnMarkers, AddPartitionsToTxn
verify-only): one connection per broker, opened on first use and again after a failure,
requests to one broker taking turns. How a broker is reached is the subclass's: a Unix
socket between the processes of one host (broker/cluster/peer_channel.py), the
inter-broker listener between hosts (broker/hosts/broker_peers.py)."""

from __future__ import annotations

import contextlib
from typing import Any

import trio

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.errors import KafkaError, PeerUnavailable
from broker.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

REQUEST_TIMEOUT_S = 10.0
WRITE_TXN_MARKERS_VERSION = 1


class PeerRequests:
    def __init__(self, node_id: int) -> None:
        self._client_id = f"broker-{node_id}"
        self._connections: dict[int, KafkaConnection] = {}
        self._locks: dict[int, trio.Lock] = {}

    async def open_stream(self, node: int) -> trio.abc.Stream:
        """A new stream to the broker (OSError or PeerUnavailable when it cannot be had)."""
        raise NotImplementedError

    async def open_connection(self, node: int) -> KafkaConnection:
        """A new connection to the broker, ready for requests (a subclass that must log
        in first makes it whole)."""
        return KafkaConnection(await self.open_stream(node), self._client_id)

    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        response: WriteTxnMarkersResponse = await self.request(
            node, request, WRITE_TXN_MARKERS_VERSION
        )
        return response

    async def request(
        self, node: int, body: Any, version: int, *, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> Any:
        """PeerUnavailable when the broker cannot be reached or does not answer within
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
                connection = await self.open_connection(node)
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
