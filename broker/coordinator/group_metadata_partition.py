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

from collections.abc import Sequence
from typing import Protocol

import trio_util

from broker.protocol.error_codes import ErrorCode

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
