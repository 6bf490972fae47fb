"""Inter-broker requests of the transaction coordinator between hosts: WriteTxnMarkers to
partition leaders and AddPartitionsToTxn v4 verify-only (KIP-890) to a producer's
transaction coordinator, over each broker's `inter.broker.listener.name` endpoint, as
Kafka's brokers send them.

The same routing and verification as between the processes of one host
(broker/transaction/marker_router.py, txn_verification.py) run over this client; only
the way to a broker differs (`PeerRequests.open_stream`): its registration under
`/brokers/ids` names the endpoint, read again at each new connection.
"""

from __future__ import annotations

from collections.abc import Mapping

import trio
import trio_util

from broker.client.peer_requests import PeerRequests
from broker.coordination.broker_registration import BrokerRegistration
from broker.errors import PeerUnavailable


class BrokerPeers(PeerRequests):
    def __init__(
        self,
        node_id: int,
        listener_name: str,
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
    ) -> None:
        super().__init__(node_id)
        self._listener_name = listener_name
        self._live = live_brokers

    async def open_stream(self, node: int) -> trio.abc.Stream:
        registration = self._live.value.get(node)
        for endpoint in registration.endpoints if registration is not None else ():
            if endpoint.listener_name == self._listener_name:
                return await trio.open_tcp_stream(endpoint.host, endpoint.port)
        raise PeerUnavailable(f"broker {node} is not registered on {self._listener_name}")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A service only to close the connections when the broker stops."""
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.aclose()
