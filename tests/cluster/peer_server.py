"""A process's private channel served as the broker serves it: an internal listener of a
real SocketServer, its requests answered by a KafkaApis with the standard middleware and
cluster-action authorization, through a request handler pool."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from broker.cluster.peer_channel import peer_listener
from broker.config import BrokerConfig
from broker.handlers.api_handler import ApiHandler, Deferred, Outcome
from broker.handlers.kafka_apis import KafkaApis, standard_middleware
from broker.handlers.middleware import Next, build_chain
from broker.handlers.middleware.authorization import ClusterActionAuthorization
from broker.metrics import MetricsRegistry
from broker.net.request import Request
from broker.net.request_handler_pool import RequestHandlerPool
from broker.net.socket_server import SocketServer
from broker.security.authorizer import Authorizer


@asynccontextmanager
async def serving_peer(
    socket_dir: Path,
    node_id: int,
    authorizer: Authorizer,
    *handlers: ApiHandler,
    overrides: Mapping[str, str] | None = None,
) -> AsyncIterator[SocketServer]:
    """Serve `handlers` on node `node_id`'s socket in `socket_dir` (and on a PLAINTEXT
    listener) until the block ends."""
    internal = peer_listener(socket_dir, node_id)
    apis = KafkaApis(handlers, standard_middleware({internal.name: internal.principal}))
    apis.use(ClusterActionAuthorization(authorizer, {internal.principal}))
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(socket_dir / "logs"),
            **(overrides or {}),
        }
    )
    server = SocketServer(config, MetricsRegistry(), apis.is_enabled, internal_listeners=[internal])
    pool = RequestHandlerPool(server.data_channel, apis, 1)
    async with trio.open_nursery() as nursery:
        await nursery.start(apis.run)
        await nursery.start(pool.run)
        await nursery.start(server.run)
        yield server
        await server.stop_processing_requests()
        server.shutdown()
        nursery.cancel_scope.cancel()


def client_listener_chain(handler: ApiHandler, authorizer: Authorizer) -> Next:
    """`handler` behind the middleware a client listener's request goes through, a
    deferred answer awaited as the API layer awaits it."""
    chain = build_chain(handler, [*standard_middleware(), ClusterActionAuthorization(authorizer)])

    async def answered(request: Request) -> Outcome:
        outcome = await chain(request)
        return await outcome.wait() if isinstance(outcome, Deferred) else outcome

    return answered
