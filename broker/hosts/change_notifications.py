"""Change notifications (`/config/changes/config_change_<seq>`, `/kafka-acl-changes/...`):
added by the broker that made a change, watched by every broker.

Kafka's brokers delete notifications older than 15 minutes; ours re-read every entity
on any notification, so only the newest matter: the writer deletes the oldest once
there are more than twice `KEPT_NOTIFICATIONS`, keeping the parent's listing short.
"""

from __future__ import annotations

import contextlib

from broker.coordination.store import CoordinationStore, NoNodeError

KEPT_NOTIFICATIONS = 100


async def notify(store: CoordinationStore, parent: str, name_prefix: str, data: bytes) -> None:
    await store.create_sequential(f"{parent}/{name_prefix}", data)
    names = await store.children(parent)
    if len(names) > 2 * KEPT_NOTIFICATIONS:
        # Zero-padded sequence numbers: the names sort in the order they were made.
        for name in sorted(names)[:-KEPT_NOTIFICATIONS]:
            with contextlib.suppress(NoNodeError):
                await store.delete(f"{parent}/{name}")
