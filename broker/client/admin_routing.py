"""Where an admin request goes on a cluster, on top of `RoutingSession`.

`RoutingSession.request` routes the data and group-member APIs by itself; the admin
commands also need a partition's leader (DeleteRecords, DescribeProducers,
WriteTxnMarkers), a transactional id's coordinator (DescribeTransactions), one node's
own process (its dynamic broker configs) and every broker (ListTransactions, which
each process answers for its own ids). These helpers hand back the session to use,
reusing the routing session's metadata and its connections to the other processes;
on a plain `ClientSession` (one broker) the answer is always that session.
"""

from __future__ import annotations

from broker.client.routing_session import RoutingSession
from broker.client.session import ClientError, ClientSession, check_error
from broker.protocol.api import ApiKey
from broker.protocol.messages import FindCoordinatorRequest

GROUP_KEY, TRANSACTION_KEY = 0, 1
"""FindCoordinator key types."""


async def leader_session(session: ClientSession, topic: str, partition: int) -> ClientSession:
    """The session to the partition's leader."""
    if not isinstance(session, RoutingSession):
        return session
    return await session.leader_session(topic, partition)


async def broker_session(session: ClientSession, node_id: int) -> ClientSession:
    """The session to broker `node_id`'s own process; ClientError if there is none."""
    if not isinstance(session, RoutingSession):
        return session
    brokers = await session.brokers()
    if node_id not in brokers:
        known = ", ".join(map(str, sorted(brokers))) or "none"
        raise ClientError(f"no broker {node_id} in the cluster (brokers: {known})")
    return await session.session_at(brokers[node_id])


async def every_broker(session: ClientSession) -> list[tuple[int, ClientSession]]:
    """(node id, session) for each broker Metadata lists, in node order."""
    if not isinstance(session, RoutingSession):
        return [(-1, session)]
    brokers = await session.brokers()
    if len(brokers) <= 1:
        return [(next(iter(brokers), -1), session)]
    return [(node, await session.session_at(address)) for node, address in sorted(brokers.items())]


async def coordinator_session(
    session: ClientSession, key: str, key_type: int = GROUP_KEY
) -> tuple[int, ClientSession]:
    """(node id, session) of the coordinator of a group or transactional id."""
    what = "transactional id" if key_type == TRANSACTION_KEY else "group"
    version = session.version_for(ApiKey.FIND_COORDINATOR, minimum=1)
    if version >= 4:
        body = FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,))
        (found,) = (await session.request(body, version)).coordinators
    else:
        found = await session.request(FindCoordinatorRequest(key=key, key_type=key_type), version)
    check_error(found.error_code, f"FindCoordinator for {what} {key!r}", found.error_message)
    if not isinstance(session, RoutingSession):
        return found.node_id, session
    await session.brokers()
    return found.node_id, await session.session_at((found.host, found.port))
