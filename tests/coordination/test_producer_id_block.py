"""Producer id blocks claimed in `/latest_producer_id_block` (Kafka's ZooKeeper layout):
brokers claiming side by side, racing on the znode's version, get disjoint blocks, and
every id a broker hands out comes from a block it claimed."""

from __future__ import annotations

import json
from typing import cast

import pytest
import trio

from broker.coordination.producer_id_block import (
    LATEST_PRODUCER_ID_BLOCK,
    ProducerIdBlock,
    ZooKeeperProducerIds,
    claim_block,
    decode_block,
    encode_block,
    next_block,
)
from broker.coordination.store import (
    BadVersionError,
    CoordinationStore,
    NodeExistsError,
    Versioned,
)


class RacingStore:
    """The znode in memory; `interleave` other brokers' claims land between a read and
    the write that follows it (the race a conditional write must survive)."""

    def __init__(self) -> None:
        self.node: Versioned | None = None
        self.interleave: list[ProducerIdBlock] = []

    async def get(self, path: str) -> Versioned | None:
        assert path == LATEST_PRODUCER_ID_BLOCK
        await trio.lowlevel.checkpoint()
        found = self.node
        if self.interleave:
            other = self.interleave.pop(0)
            version = -1 if self.node is None else self.node.version
            self.node = Versioned(encode_block(other), version + 1)
        return found

    async def create(self, path: str, data: bytes) -> None:
        if self.node is not None:
            raise NodeExistsError(path)
        self.node = Versioned(data, 0)

    async def set(self, path: str, data: bytes, *, version: int = -1) -> int:
        assert self.node is not None
        if version != self.node.version:
            raise BadVersionError(path)
        self.node = Versioned(data, version + 1)
        return version + 1


def as_store(store: RacingStore) -> CoordinationStore:
    return cast(CoordinationStore, store)


def test_the_znode_is_kafkas_document() -> None:
    block = ProducerIdBlock(2, 1000, 1999)
    assert json.loads(encode_block(block)) == {
        "version": 1,
        "broker": 2,
        "block_start": "1000",
        "block_end": "1999",
    }
    assert decode_block(encode_block(block)) == block
    assert next_block(block, 3, 1000) == ProducerIdBlock(3, 2000, 2999)
    assert next_block(None, 1, 10) == ProducerIdBlock(1, 0, 9)
    with pytest.raises(ValueError, match="no producer id block"):
        decode_block(b'{"version": 1}')


async def test_a_claim_that_lost_the_race_reads_again() -> None:
    store = RacingStore()
    store.interleave = [ProducerIdBlock(9, 0, 99)]  # created under our feet
    assert await claim_block(as_store(store), 1, 100) == ProducerIdBlock(1, 100, 199)
    store.interleave = [ProducerIdBlock(8, 200, 299)]  # a set between our read and write
    assert await claim_block(as_store(store), 1, 100) == ProducerIdBlock(1, 300, 399)


async def test_brokers_side_by_side_never_hand_out_the_same_id() -> None:
    store = RacingStore()
    brokers = [ZooKeeperProducerIds(as_store(store), node, size=7) for node in (1, 2, 3)]
    handed: list[int] = []

    async def allocate(ids: ZooKeeperProducerIds) -> None:
        for _ in range(20):
            handed.append(await ids.allocate())

    async with trio.open_nursery() as nursery:
        for ids in brokers:
            nursery.start_soon(allocate, ids)
    assert len(handed) == len(set(handed)) == 60
    assert store.node is not None
    assert decode_block(store.node.data).end >= max(handed)
