"""Change notifications (`/config/changes/config_change_<seq>`, `/kafka-acl-changes/...`):
added by the broker that made a change, watched by every broker.

Kafka's brokers delete notifications older than 15 minutes; ours re-read every entity
on any notification, so only the newest matter: the writer deletes the oldest once
there are more than twice `KEPT_NOTIFICATIONS`, keeping the parent's listing short.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

import trio

from broker.coordination.store import CoordinationError, CoordinationStore, NoNodeError, WatchEvent

log = logging.getLogger(__name__)

KEPT_NOTIFICATIONS = 100


async def notify(store: CoordinationStore, parent: str, name_prefix: str, data: bytes) -> None:
    await store.create_sequential(f"{parent}/{name_prefix}", data)
    names = await store.children(parent)
    if len(names) > 2 * KEPT_NOTIFICATIONS:
        # Zero-padded sequence numbers: the names sort in the order they were made.
        for name in sorted(names)[:-KEPT_NOTIFICATIONS]:
            with contextlib.suppress(NoNodeError):
                await store.delete(f"{parent}/{name}")


async def follow_notifications(
    store: CoordinationStore,
    parents: Sequence[str],
    reread: Callable[[], Awaitable[object]],
    *,
    interval_s: float,
    what: str,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Call `reread` now (started once it has read), then on every notification under
    `parents` and every `interval_s` besides: a watch lost with a session is re-made on
    the next round, and what it missed read then. Errors of a round are logged."""
    send, receive = trio.open_memory_channel[WatchEvent](16)

    async def watch_and_reread() -> None:
        for parent in parents:
            await store.children(parent, watch=send)
        await reread()

    await watch_and_reread()
    task_status.started()
    while True:
        with trio.move_on_after(interval_s):
            await receive.receive()
        try:
            await watch_and_reread()
        except (CoordinationError, ConnectionError) as exc:
            log.warning("cannot read the %s from ZooKeeper: %s", what, exc)
