"""The Service a broker runs when `zookeeper.connect` is set.

Start-up (before the network): connect, or fail start-up with one line naming
`zookeeper.connect`; create Kafka's persistent paths. Once the listeners are
bound (their ports are then known): register `/brokers/ids/<id>`, follow the
live brokers and take part in the controller election. When the session ends
(expired while the broker was stopped or cut off) its ephemeral znodes are
gone: as soon as a new session is connected the broker registers again and
re-runs the election, as Kafka's KafkaZkClient session handlers do.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import trio

from broker.coordination.broker_registration import (
    BROKER_IDS_PATH,
    BrokerRegistration,
    register_broker,
)
from broker.coordination.controller_election import ControllerElection
from broker.coordination.live_brokers import LiveBrokers
from broker.coordination.store import CoordinationStore, CoordinationUnavailable, SessionState

log = logging.getLogger(__name__)

# The persistent paths Kafka 2.x creates at start-up that this broker uses so far.
PERSISTENT_PATHS = (BROKER_IDS_PATH, "/brokers/topics", "/config/topics", "/config/brokers")


class ClusterMembership:
    def __init__(
        self,
        store: CoordinationStore,
        node_id: int,
        registration: Callable[[], BrokerRegistration],
        listening: Callable[[], Awaitable[object]],
        *,
        live_brokers: LiveBrokers | None = None,
        election: ControllerElection | None = None,
        on_session_renewed: Callable[[], None] | None = None,
        leaving: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`registration` is called once the listeners are bound (`listening` returned).
        A deployment whose topology reads the views before the broker is assembled
        builds them on the same store and passes them in; `on_session_renewed` re-reads
        its other views when the session comes back; `leaving` is the controlled
        shutdown `leave` runs."""
        self._store = store
        self._registration = registration
        self._listening = listening
        self.live_brokers = live_brokers or LiveBrokers(store)
        self.election = election or ControllerElection(store, node_id)
        self.registered = trio.Event()
        self._on_session_renewed = on_session_renewed
        self._leaving = leaving

    async def leave(self) -> None:
        """A graceful shutdown's first step, while the listeners still serve: the
        controlled shutdown (leadership moved away), where the deployment has one."""
        if self._leaving is not None and self.registered.is_set():
            await self._leaving()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sessions_in, sessions = trio.open_memory_channel[SessionState](math.inf)
        self._store.watch_session(sessions_in)
        try:
            await self._store.connect()
            for path in PERSISTENT_PATHS:
                await self._store.ensure_path(path)
            task_status.started()
            await self._listening()
            registration = self._registration()
            await register_broker(self._store, registration)
            log.info("registered in ZooKeeper as /brokers/ids/%d", registration.node_id)
            self.registered.set()
            async with trio.open_nursery() as nursery:
                await nursery.start(self.live_brokers.run)
                await nursery.start(self.election.run)
                await self._follow_session(sessions)
        finally:
            with trio.CancelScope(shield=True):
                await self._store.close()

    async def _follow_session(self, sessions: trio.MemoryReceiveChannel[SessionState]) -> None:
        """Register again after a lost session; re-read the views after any disruption."""
        registered, disrupted = True, False
        async for state in sessions:
            if state is SessionState.LOST:
                log.warning("ZooKeeper session expired: registering again once reconnected")
                self.election.resign()
                registered, disrupted = False, True
            elif state is SessionState.SUSPENDED:
                log.warning("ZooKeeper connection lost; the session may still be alive")
                disrupted = True
            elif disrupted:
                if not registered:
                    try:
                        await register_broker(self._store, self._registration())
                    except CoordinationUnavailable as exc:
                        log.warning("registration waits for ZooKeeper: %s", exc)
                        continue
                    registered = True
                    log.info("registered again with ZooKeeper in a new session")
                disrupted = False
                self.live_brokers.session_renewed()
                self.election.session_renewed()
                if self._on_session_renewed is not None:
                    self._on_session_renewed()
