"""Wiring of the multi-host cluster's membership: only when `zookeeper.connect` is set.

Without it nothing is added, so a single host (and `make run`) needs no
ZooKeeper. With it, the broker runs `ClusterMembership` first among its
services: ZooKeeper unreachable fails start-up before any log is opened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.broker_context import BrokerContext
from broker.config import BrokerConfig
from broker.coordination.broker_registration import BrokerEndpoint, BrokerRegistration
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.membership import ClusterMembership


def zookeeper_settings(config: BrokerConfig) -> ZooKeeperSettings | None:
    connect = config.cluster.zookeeper_connect
    if connect is None:
        return None
    session_timeout_ms = config.cluster.zookeeper_session_timeout_ms
    connection_timeout_ms = config.cluster.zookeeper_connection_timeout_ms
    return ZooKeeperSettings(
        connect=connect,
        session_timeout_ms=session_timeout_ms,
        connection_timeout_ms=connection_timeout_ms or session_timeout_ms,
    )


def broker_registration(context: BrokerContext) -> Callable[[], BrokerRegistration]:
    """`/brokers/ids/<id>`'s content, read once the listeners are bound (real ports)."""
    config = context.config

    def registration() -> BrokerRegistration:
        endpoints = tuple(
            BrokerEndpoint(
                endpoint.listener_name,
                endpoint.security_protocol,
                *context.advertised_endpoint(endpoint.listener_name),
            )
            for endpoint in config.advertised_listeners
        )
        return BrokerRegistration(context.node_id, endpoints, rack=config.server.rack)

    return registration


def add_cluster_membership(
    context: BrokerContext, listening: Callable[[], Awaitable[object]]
) -> ClusterMembership | None:
    """The membership Service, registering once `listening` returns (ports bound)."""
    settings = zookeeper_settings(context.config)
    if settings is None:
        return None
    return ClusterMembership(
        KazooCoordinationStore(settings), context.node_id, broker_registration(context), listening
    )
