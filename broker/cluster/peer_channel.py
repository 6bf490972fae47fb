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

import logging
from pathlib import Path

import trio

from broker.client.peer_requests import PeerRequests
from broker.net.internal_listener import InternalListener
from broker.net.request import CLUSTER_PRINCIPAL
from broker.protocol.api import ApiKey

log = logging.getLogger(__name__)

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


class PeerClient(PeerRequests):
    """Sends requests to the other processes over their Unix sockets."""

    def __init__(self, socket_dir: Path, node_id: int) -> None:
        super().__init__(node_id)
        self.socket_dir = socket_dir

    async def open_stream(self, node: int) -> trio.abc.Stream:
        return await trio.open_unix_socket(str(socket_path(self.socket_dir, node)))
