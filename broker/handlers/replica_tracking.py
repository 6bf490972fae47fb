"""What Fetch and Produce tell replication (the leader's side of Kafka's ReplicaManager).

Given to the handlers at construction by the deployment: hosts coordinated through
ZooKeeper track each follower's fetch offset and move the high watermark from the
ISR (broker/hosts/partition_leaders.py); every other deployment has one replica per
partition, so there is nothing to track (`NO_REPLICATION`).
"""

from __future__ import annotations

from typing import Protocol

from broker.protocol.error_codes import ErrorCode


class ReplicaTracking(Protocol):
    def on_follower_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int
    ) -> ErrorCode:
        """A follower's Fetch (replica id set) asked for `fetch_offset`, so it holds
        everything before it; called before the read so the answer carries the high
        watermark that fetch moved."""
        ...


class NoReplication:
    def on_follower_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int
    ) -> ErrorCode:
        return ErrorCode.NONE


NO_REPLICATION: ReplicaTracking = NoReplication()
