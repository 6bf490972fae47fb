"""Producer ids unique across brokers: Kafka 2.x's ZooKeeper-based ProducerIdManager.

Each broker claims blocks of ids from `/latest_producer_id_block`, a znode holding the
last block handed out (`{"version":1,"broker":B,"block_start":"S","block_end":"E"}`,
Kafka's ProducerIdBlockZNode, the bounds as strings and inclusive). A claim reads the
znode and writes the next block at the version read; a broker that lost the race reads
again. The block is claimed before any id in it is handed out, so a broker that dies
skips the rest of its block and no id is ever given twice, whichever broker becomes
the transaction coordinator.
"""

from __future__ import annotations

import json

import attrs
import trio

from broker.coordination.store import (
    BadVersionError,
    CoordinationStore,
    NodeExistsError,
)

LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
BLOCK_SIZE = 1000
"""Kafka's PidBlockSize."""


@attrs.frozen
class ProducerIdBlock:
    broker_id: int
    start: int
    end: int  # inclusive


def encode_block(block: ProducerIdBlock) -> bytes:
    return json.dumps(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.start),
            "block_end": str(block.end),
        }
    ).encode()


def decode_block(data: bytes) -> ProducerIdBlock:
    """ValueError when the znode does not hold a block."""
    try:
        found = json.loads(data)
        return ProducerIdBlock(
            int(found["broker"]), int(found["block_start"]), int(found["block_end"])
        )
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{LATEST_PRODUCER_ID_BLOCK} holds no producer id block: {exc}") from exc


def next_block(latest: ProducerIdBlock | None, broker_id: int, size: int) -> ProducerIdBlock:
    start = 0 if latest is None else latest.end + 1
    return ProducerIdBlock(broker_id, start, start + size - 1)


async def claim_block(store: CoordinationStore, broker_id: int, size: int) -> ProducerIdBlock:
    """The next block, written at the version read (CoordinationUnavailable and
    ValueError propagate)."""
    while True:
        found = await store.get(LATEST_PRODUCER_ID_BLOCK)
        if found is None:
            block = next_block(None, broker_id, size)
            try:
                await store.create(LATEST_PRODUCER_ID_BLOCK, encode_block(block))
            except NodeExistsError:
                continue
            return block
        block = next_block(decode_block(found.data), broker_id, size)
        try:
            await store.set(LATEST_PRODUCER_ID_BLOCK, encode_block(block), version=found.version)
        except BadVersionError:
            continue
        return block


class ZooKeeperProducerIds:
    """This broker's ids, one claimed block at a time."""

    def __init__(self, store: CoordinationStore, broker_id: int, size: int = BLOCK_SIZE) -> None:
        self._store = store
        self._broker_id = broker_id
        self._size = size
        self._next = 0
        self._end = -1
        self._lock = trio.Lock()

    async def allocate(self) -> int:
        async with self._lock:
            if self._next > self._end:
                block = await claim_block(self._store, self._broker_id, self._size)
                self._next, self._end = block.start, block.end
            producer_id = self._next
            self._next += 1
            return producer_id
