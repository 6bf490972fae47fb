"""Inter-broker requests of the transaction coordinator between hosts: WriteTxnMarkers to
partition leaders and AddPartitionsToTxn v4 verify-only (KIP-890) to a producer's
transaction coordinator, over each broker's `inter.broker.listener.name` endpoint, as
Kafka's brokers send them.

The same routing and verification as between the processes of one host
(broker/transaction/marker_router.py, txn_verification.py) run over this client; only
the way to a broker differs: its registration under `/brokers/ids` names the endpoint.
One connection per broker, opened on first use and again after a failure; requests to
one broker take turns.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import trio
import trio_util

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.coordination.broker_registration import BrokerRegistration
from broker.errors import KafkaError, PeerUnavailable
from broker.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
WRITE_TXN_MARKERS_VERSION = 1


class BrokerPeers:
    def __init__(
        self,
        node_id: int,
        listener_name: str,
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
    ) -> None:
        self._client_id = f"broker-{node_id}"
        self._listener_name = listener_name
        self._live = live_brokers
        self._connections: dict[int, tuple[tuple[str, int], KafkaConnection]] = {}
        self._locks: dict[int, trio.Lock] = {}

    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        response: WriteTxnMarkersResponse = await self.request(
            node, request, WRITE_TXN_MARKERS_VERSION
        )
        return response

    async def request(
        self, node: int, body: Any, version: int, *, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> Any:
        """PeerUnavailable when the broker is not registered, cannot be reached or does
        not answer within `timeout_s` (waiting for the connection's turn included)."""
        lock = self._locks.setdefault(node, trio.Lock())
        try:
            with trio.fail_after(timeout_s):
                async with lock:
                    return await self._request_locked(node, body, version)
        except trio.TooSlowError as exc:
            raise PeerUnavailable(f"broker {node}: no answer in {timeout_s} s") from exc

    def _endpoint(self, node: int) -> tuple[str, int]:
        registration = self._live.value.get(node)
        for endpoint in registration.endpoints if registration is not None else ():
            if endpoint.listener_name == self._listener_name:
                return endpoint.host, endpoint.port
        raise PeerUnavailable(f"broker {node} is not registered on {self._listener_name}")

    async def _request_locked(self, node: int, body: Any, version: int) -> Any:
        endpoint = self._endpoint(node)
        answered = False
        try:
            known = self._connections.get(node)
            if known is None or known[0] != endpoint:
                connection = await KafkaConnection.connect(*endpoint, self._client_id)
                self._connections[node] = (endpoint, connection)
            else:
                connection = known[1]
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
            raise PeerUnavailable(f"broker {node}: {exc!r}") from exc
        finally:
            if not answered:  # failed or cancelled mid-request: its answer may still come
                dropped = self._connections.pop(node, None)
                if dropped is not None:
                    with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await dropped[1].aclose()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A service only to close the connections when the broker stops."""
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                for _, connection in self._connections.values():
                    with contextlib.suppress(Exception):
                        await connection.aclose()
                self._connections.clear()
