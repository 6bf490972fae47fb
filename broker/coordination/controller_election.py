"""Controller election through Kafka 2.x's `/controller` and `/controller_epoch`.

As KafkaController.elect does: read `/controller` (leaving a watch); when no
broker holds it, create it as an ephemeral znode and, in the same store
transaction, set `/controller_epoch` to the epoch read plus one, conditional on
the version read. Two brokers racing both read the same epoch version, so only
one transaction commits: exactly one controller per epoch, and the epoch grows
by one per election. When the controller's session ends its `/controller`
disappears, the watch fires on every other broker, and they elect again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time

import attrs
import trio
import trio_util

from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.store import (
    BadVersionError,
    CoordinationStore,
    CoordinationUnavailable,
    CreateOp,
    NodeExistsError,
    SetOp,
    Versioned,
    WatchedChange,
    WatchEvent,
    WatchSink,
)

log = logging.getLogger(__name__)

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
NO_CONTROLLER = -1
INITIAL_CONTROLLER_EPOCH = 0


def controller_json(node_id: int, timestamp_ms: int) -> bytes:
    document = {"version": 1, "brokerid": node_id, "timestamp": str(timestamp_ms)}
    return json.dumps(document, separators=(",", ":")).encode()


def controller_id_of(node: Versioned | None) -> int:
    """The controller's id; NO_CONTROLLER when missing or not Kafka's document (as Kafka's
    ControllerZNode.decode: the node still blocks an election until its owner goes)."""
    if node is None:
        return NO_CONTROLLER
    try:
        document = json.loads(node.data)
        broker_id = document["brokerid"]
    except (ValueError, TypeError, KeyError):
        return NO_CONTROLLER
    return broker_id if isinstance(broker_id, int) else NO_CONTROLLER


@attrs.frozen
class ControllerView:
    """The controller this broker knows of, and the epoch of its own election (0 if none)."""

    controller_id: int = NO_CONTROLLER
    own_epoch: int = INITIAL_CONTROLLER_EPOCH


class ControllerElection:
    def __init__(self, store: CoordinationStore, node_id: int) -> None:
        self._store = store
        self._node_id = node_id
        self.view: trio_util.AsyncValue[ControllerView] = trio_util.AsyncValue(ControllerView())
        self._events_in, self._events = trio.open_memory_channel[WatchEvent](math.inf)

    @property
    def is_controller(self) -> bool:
        view: ControllerView = self.view.value
        return view.controller_id == self._node_id

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Elect, then follow `/controller` through its watch until cancelled.

        All election work happens in this task, one event at a time, so exactly one
        watch is left on `/controller` after each. Without ZooKeeper the round is
        dropped: the next session event (`session_renewed`) starts it again.
        """
        self.session_renewed()
        task_status.started()
        async for _event in self._events:
            try:
                # Every change, not only a deletion: a controller may have come and gone
                # between the event and the read, and then this broker must stand.
                await self.elect()
            except CoordinationUnavailable as exc:
                log.warning("controller election waits for ZooKeeper: %s", exc)
            except MalformedZnode as exc:  # someone else's write; an operator must repair it
                log.error("controller election stopped until the next change: %s", exc)

    def session_renewed(self) -> None:
        """Elect again: the session came back, perhaps without this broker's watches."""
        self._events_in.send_nowait(WatchEvent(CONTROLLER_PATH, WatchedChange.DELETED))

    async def elect(self) -> None:
        """One election round; leaves exactly one watch on `/controller`."""
        current = await self._store.get(CONTROLLER_PATH, watch=self._watch)
        if current is not None:
            self._follow(current)
            return
        epoch_node = await self._controller_epoch()
        if not epoch_node.data.strip().isdigit():
            raise MalformedZnode(f"{CONTROLLER_EPOCH_PATH}: {epoch_node.data[:40]!r} is no epoch")
        new_epoch = int(epoch_node.data) + 1
        try:
            await self._store.commit(
                [
                    CreateOp(
                        CONTROLLER_PATH,
                        controller_json(self._node_id, int(time.time() * 1000)),
                        ephemeral=True,
                    ),
                    SetOp(CONTROLLER_EPOCH_PATH, str(new_epoch).encode(), epoch_node.version),
                ]
            )
        except (NodeExistsError, BadVersionError):
            # Another broker won this round; the watch left above reports its znode.
            log.info("controller election: another broker was elected first")
            return
        log.info("broker %d is the controller (controller epoch %d)", self._node_id, new_epoch)
        self.view.value = ControllerView(self._node_id, new_epoch)

    def resign(self) -> None:
        """The session ended: whatever this broker held in it is gone."""
        view: ControllerView = self.view.value
        if view.controller_id == self._node_id:
            log.warning("broker %d resigns as controller: its session ended", self._node_id)
        self.view.value = ControllerView()

    @property
    def _watch(self) -> WatchSink:
        return self._events_in

    def _follow(self, node: Versioned | None) -> None:
        controller_id = controller_id_of(node)
        view: ControllerView = self.view.value
        own_epoch = view.own_epoch if controller_id == self._node_id else INITIAL_CONTROLLER_EPOCH
        self.view.value = ControllerView(controller_id, own_epoch)

    async def _controller_epoch(self) -> Versioned:
        node = await self._store.get(CONTROLLER_EPOCH_PATH)
        if node is not None:
            return node
        with contextlib.suppress(NodeExistsError):
            await self._store.create(CONTROLLER_EPOCH_PATH, str(INITIAL_CONTROLLER_EPOCH).encode())
        node = await self._store.get(CONTROLLER_EPOCH_PATH)
        assert node is not None, "/controller_epoch is never deleted"
        return node
