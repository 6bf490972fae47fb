"""The replicated partition of `__consumer_offsets` that the group coordinator writes its
state to where brokers run on several hosts (Kafka's GroupMetadataManager over its
partition of the internal topic).

The deployment gives the group coordinator one (`Deployment.group_metadata_partition`;
`broker/hosts/consumer_offsets_partition.py` under `zookeeper.connect`) or None, where
the coordinator keeps its journal files (a broker alone, the one-host cluster). The
coordinator of every group is the leader of this partition: when this broker becomes it,
the coordinator loads the groups from the partition's log before answering (Kafka's
loadGroupsForPartition); while it leads, each change is appended and a commit is
acknowledged once every in-sync replica holds it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import trio
import trio_util

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

READ_RETRY_S = 1.0
"""How long a failed read of the partition waits before the next."""

CONSUMER_OFFSETS = "__consumer_offsets"

KeyedRecord = tuple[bytes, bytes | None]
"""A record of the partition: its key and its value (None: a tombstone)."""


class GroupMetadataPartition(Protocol):
    @property
    def leadership(self) -> trio_util.AsyncValue[int | None]:
        """The leader epoch while this broker leads the partition and can append to it
        (its log opened as the leader's, its followers tracked); None otherwise."""
        ...

    async def read_records(self) -> list[KeyedRecord]:
        """Every record of this broker's replica log, in offset order."""
        ...

    async def append(self, records: Sequence[KeyedRecord]) -> ErrorCode:
        """Append the records as the leader and wait until every in-sync replica holds
        them: NONE, or the error Produce with acks=all would have answered."""
        ...


async def read_while_leading(
    partition: GroupMetadataPartition, epoch: int
) -> list[KeyedRecord] | None:
    """The partition's records as a new leader loads them, reads that fail retried (None:
    leadership moved before they could be read)."""
    while partition.leadership.value == epoch:
        try:
            return await partition.read_records()
        except KafkaError as exc:
            log.warning("cannot load the partition's records yet: %s", exc.message)
            await trio.sleep(READ_RETRY_S)
    return None
