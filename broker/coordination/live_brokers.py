"""The live brokers: the children of `/brokers/ids`, followed through a watch.

Each change of the set re-reads it and every registration, so
the view is never older than the last watch event delivered.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

import attrs
import trio
import trio_util

from broker.coordination.broker_registration import (
    BROKER_IDS_PATH,
    BrokerRegistration,
    MalformedZnode,
    broker_path,
)
from broker.coordination.store import (
    CoordinationStore,
    CoordinationUnavailable,
    WatchedChange,
    WatchEvent,
)

log = logging.getLogger(__name__)


class LiveBrokers:
    def __init__(self, store: CoordinationStore) -> None:
        self._store = store
        self.brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]] = trio_util.AsyncValue(
            {}
        )
        self._events_in, self._events = trio.open_memory_channel[WatchEvent](math.inf)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the set, then again on each watch event, in this task only (one watch)."""
        self.session_renewed()
        task_status.started()
        async for _event in self._events:
            try:
                await self.refresh()
            except CoordinationUnavailable as exc:
                log.warning("live brokers not refreshed, ZooKeeper unavailable: %s", exc)

    def session_renewed(self) -> None:
        """Read the set again: the session came back, perhaps without the watch."""
        self._events_in.send_nowait(WatchEvent(BROKER_IDS_PATH, WatchedChange.CHILDREN_CHANGED))

    async def refresh(self) -> None:
        """Read the set again, leaving one watch on it."""
        names = await self._store.children(BROKER_IDS_PATH, watch=self._events_in)
        brokers: dict[int, BrokerRegistration] = {}
        for name in names:
            if not name.isdigit():
                log.warning("ignored %s/%s: not a broker id", BROKER_IDS_PATH, name)
                continue
            node_id = int(name)
            # Read every time: a broker may have left and registered again with new endpoints.
            node = await self._store.get(broker_path(node_id))
            if node is None:  # it went away meanwhile; the watch says so
                continue
            try:
                registration = BrokerRegistration.from_json(node_id, node.data)
                brokers[node_id] = attrs.evolve(registration, broker_epoch=node.created_zxid)
            except MalformedZnode as exc:
                log.warning("ignored %s", exc)
        self.brokers.value = brokers
