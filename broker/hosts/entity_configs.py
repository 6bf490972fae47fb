"""Read-modify-write of one `/config/<entity>` znode, shared by the SCRAM credentials and
the client quotas that Kafka 2.x keeps in the same znode of a user: the change is
applied to the config as stored and written at the version read, again when another
broker wrote first, and every broker is told through `/config/changes`."""

from __future__ import annotations

from collections.abc import Callable

from broker.coordination.config_znodes import (
    CONFIG_CHANGE_NAME,
    CONFIG_CHANGES_PATH,
    CONFIG_PATH,
    decode_entity_config,
    encode_config_change,
    encode_entity_config,
)
from broker.coordination.store import (
    BadVersionError,
    CoordinationError,
    CoordinationStore,
    NodeExistsError,
)
from broker.hosts.change_notifications import notify

WRITE_ATTEMPTS = 10


async def change_entity_config(
    store: CoordinationStore, entity_path: str, change: Callable[[dict[str, str]], None]
) -> None:
    """`entity_path` is relative to /config (`users/alice`); `change` edits the config in
    place. Raises CoordinationError (ZooKeeper's, or lost to others too often)."""
    path = f"{CONFIG_PATH}/{entity_path}"
    for _ in range(WRITE_ATTEMPTS):
        found = await store.get(path)
        config = {} if found is None else decode_entity_config(path, found.data)
        change(config)
        try:
            if found is None:
                await store.ensure_path(path.rsplit("/", 1)[0])
                await store.create(path, encode_entity_config(config))
            else:
                await store.set(path, encode_entity_config(config), version=found.version)
            break
        except (NodeExistsError, BadVersionError):
            continue  # another broker wrote the entity meanwhile: apply ours to theirs
    else:
        raise CoordinationError(f"{path}: changed by others {WRITE_ATTEMPTS} times in a row")
    await notify(store, CONFIG_CHANGES_PATH, CONFIG_CHANGE_NAME, encode_config_change(entity_path))
