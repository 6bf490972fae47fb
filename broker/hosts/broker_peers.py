"""Inter-broker requests of the transaction coordinator between hosts: WriteTxnMarkers to
partition leaders and AddPartitionsToTxn v4 verify-only (KIP-890) to a producer's
transaction coordinator, over each broker's inter-broker listener, logged in as the
broker (`inter_broker_security.py`), as Kafka's brokers send them.

The same routing and verification as between the processes of one host
(broker/transaction/marker_router.py, txn_verification.py) run over this client; only
the way to a broker differs (`PeerRequests.open_connection`): its registration under
`/brokers/ids` names the endpoint, read again at each new connection.
"""

from __future__ import annotations

import trio

from broker.client.connection import KafkaConnection
from broker.client.peer_requests import PeerRequests
from broker.hosts.inter_broker_security import BrokerConnector


class BrokerPeers(PeerRequests):
    def __init__(self, node_id: int, connector: BrokerConnector) -> None:
        super().__init__(node_id)
        self._connector = connector

    async def open_connection(self, node: int) -> KafkaConnection:
        return await self._connector.connect(node, self._client_id)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A service only to close the connections when the broker stops."""
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.aclose()
