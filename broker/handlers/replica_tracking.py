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

    def tracked(self, topic: str, partition: int) -> bool:
        """Whether this broker leads the partition with followers it tracks."""
        ...

    def check_produce(self, topic: str, partition: int, required_acks: int) -> ErrorCode:
        """Before the append of a tracked partition: NOT_ENOUGH_REPLICAS for acks=all
        below min.insync.replicas."""
        ...

    def on_append(self, topic: str, partition: int) -> None:
        """The partition's log grew (alone in the ISR, its high watermark moves)."""
        ...

    async def wait_for_acks(
        self, topic: str, partition: int, required_offset: int, timeout_s: float
    ) -> ErrorCode:
        """An acks=all produce's answer once every ISR member holds the records before
        `required_offset` (REQUEST_TIMED_OUT after `timeout_s`)."""
        ...

    def corrupt_read(self, topic: str, partition: int) -> ErrorCode:
        """A read of a partition led here met a corrupt batch: the code Fetch answers.
        NOT_LEADER_OR_FOLLOWER while leadership moves to an in-sync replica that has
        its own copy (the client finds the new leader and reads on), CORRUPT_MESSAGE
        when no replica can repair it (docs/corrupt-data.md)."""
        ...

    def throttle_replica_fetch(self, topic: str, partition: int, replica_id: int) -> bool:
        """Whether a follower's Fetch of the partition is answered without records now:
        the reassignment throttle (Kafka's shouldLeaderThrottle: the partition named in
        leader.replication.throttled.replicas, the follower not in the ISR, the rate over
        leader.replication.throttled.rate)."""
        ...

    def replica_bytes_sent(self, topic: str, partition: int, size: int) -> None:
        """Bytes of the partition sent to a follower, counted where it is throttled."""
        ...


class NoReplication:
    def on_follower_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int
    ) -> ErrorCode:
        return ErrorCode.NONE

    def tracked(self, topic: str, partition: int) -> bool:
        return False

    def check_produce(self, topic: str, partition: int, required_acks: int) -> ErrorCode:
        return ErrorCode.NONE

    def on_append(self, topic: str, partition: int) -> None:
        return None

    async def wait_for_acks(
        self, topic: str, partition: int, required_offset: int, timeout_s: float
    ) -> ErrorCode:
        return ErrorCode.NONE

    def corrupt_read(self, topic: str, partition: int) -> ErrorCode:
        return ErrorCode.CORRUPT_MESSAGE

    def throttle_replica_fetch(self, topic: str, partition: int, replica_id: int) -> bool:
        return False

    def replica_bytes_sent(self, topic: str, partition: int, size: int) -> None:
        return None


NO_REPLICATION: ReplicaTracking = NoReplication()
