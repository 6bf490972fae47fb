"""What a supervisor of a host among hosts knows of its processes in ZooKeeper.

With `zookeeper.connect` each process of the supervisor is a broker of the ZooKeeper
cluster and registers itself under `/brokers/ids` (broker/coordination/). The
supervisor reads those registrations on a session of its own: a process is ready once
its znode exists, and a process that died (kill -9 included) is started again only
once its old session has ended and taken the znode with it. Started earlier, the new
process would find its id taken and stop (DuplicateBrokerId, as a Kafka broker
restarted within its session timeout does), and the controller would not see the
broker leave, so it would not move the leadership the dead process held.
"""

from __future__ import annotations

import logging

import trio

from broker.coordination.broker_registration import (
    BrokerRegistration,
    MalformedZnode,
    broker_path,
)
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.partition_state_znodes import TOPICS_PATH, TopicAssignment, topic_path
from broker.coordination.store import CoordinationError, CoordinationUnavailable, NoNodeError

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1
"""How often registrations are read while the supervisor waits on one."""

GONE_MARGIN_S = 5.0
"""Beyond the session timeout, how long a dead process's registration may linger
(ZooKeeper expires sessions on its own tick) before the process is started anyway."""


class ZooKeeperRegistrations:
    def __init__(self, settings: ZooKeeperSettings, *, margin_s: float = GONE_MARGIN_S) -> None:
        self._settings = settings
        self._margin_s = margin_s
        self._store = KazooCoordinationStore(settings)

    async def connect(self) -> None:
        await self._store.connect()

    async def close(self) -> None:
        await self._store.close()

    async def registration(self, node: int) -> BrokerRegistration | None:
        """`node`'s registration now: its endpoints, which the supervisor's console
        connects to (None while there is none, ZooKeeper is away, or the znode is not
        Kafka's document)."""
        try:
            found = await self._store.get(broker_path(node))
        except (CoordinationError, CoordinationUnavailable):
            return None
        if found is None:
            return None
        try:
            return BrokerRegistration.from_json(node, found.data)
        except MalformedZnode:
            return None

    async def replica_of(self, nodes: set[int]) -> dict[int, list[str]]:
        """For each of `nodes`, the partitions (`topic-partition`, sorted) whose replica
        lists in ZooKeeper name it: what stays under-replicated while it is gone."""
        found: dict[int, list[str]] = {node: [] for node in nodes}
        try:
            topics = await self._store.children(TOPICS_PATH)
        except NoNodeError:
            return found
        for topic in topics:
            znode = await self._store.get(topic_path(topic))
            if znode is None:
                continue  # deleted meanwhile
            try:
                assignment = TopicAssignment.decode(topic, znode.data)
            except MalformedZnode:
                continue  # the brokers report it
            for partition, replicas in sorted(assignment.partitions.items()):
                for node in nodes.intersection(replicas):
                    found[node].append(f"{topic}-{partition}")
        return found

    async def _is_registered(self, node: int) -> bool:
        return await self._store.get(broker_path(node)) is not None

    async def wait_unregistered(self, node: int) -> None:
        """Until `node`'s registration is gone: at once after a clean exit (the process
        closed its session), within the session timeout after a crash. Bounded: a
        registration still there after that belongs to a live broker with the same id,
        which the process started next reports in its own line; so does a ZooKeeper
        that stays away."""
        limit_s = self._settings.session_timeout_ms / 1000 + self._margin_s
        with trio.move_on_after(limit_s):
            waited = False
            while True:
                try:
                    if not await self._is_registered(node):
                        return
                except (CoordinationError, CoordinationUnavailable):
                    pass  # still ours to wait for
                if not waited:
                    log.info(
                        "node %d is still registered in ZooKeeper; waiting for its session"
                        " to end (zookeeper.session.timeout.ms=%d)",
                        node,
                        self._settings.session_timeout_ms,
                    )
                    waited = True
                await trio.sleep(POLL_INTERVAL_S)
