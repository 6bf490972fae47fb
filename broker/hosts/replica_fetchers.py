"""The replica fetchers of a broker among hosts (Kafka's ReplicaFetcherManager).

For every partition whose replicas name this broker while another live broker leads
it (the partition states as the log last applied them), a `ReplicaFetcher` of that
leader copies the leader's batches into this broker's log of the partition. Each
leader's partitions are spread over `num.replica.fetchers` fetchers as Kafka's
AbstractFetcherManager hashes them (`fetcher_id`), each on its own connection to the
leader's inter-broker listener, logged in as the broker (`inter_broker_security.py`),
made again after a failure. A partition whose leader or leader epoch changed is handed
to the new leader's fetcher; one this broker leads now is dropped before the log takes
appends from producers.

The follower's log is the broker's own (`broker/log/follower_log.py`): it appends
keeping the leader's offsets and epochs and truncates where the leader's history
diverges (KIP-101/279). The leader tracks them from their fetches
(`broker/hosts/partition_leaders.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import trio
import trio_util

from broker.client.connection import KafkaConnection
from broker.coordination.broker_registration import BrokerRegistration
from broker.hosts.inter_broker_security import BrokerConnector
from broker.hosts.partition_state_view import HostsImage
from broker.log.follower_log import PartitionFollowerLog
from broker.log.partition_log import PartitionLog
from broker.protocol.frame_buffers import FrameBuffers
from broker.replication.fetcher_partition_state import (
    SendFetch,
    SendListOffsets,
    SendOffsetsForLeaderEpoch,
)
from broker.replication.kafka_fetch_session import KafkaFetchSession
from broker.replication.leader_and_isr import NO_LEADER
from broker.replication.leader_fetch_session import (
    EpochEndOffsetAnswer,
    FetchedPartition,
    FetchLimits,
    LeaderOffsets,
)
from broker.replication.replica_fetcher import (
    SESSION_FAILURES,
    ReplicaFetcher,
    ReplicaFetcherSettings,
)
from broker.replication.replication_quota import ReplicationQuotaManager
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")
Connect = Callable[[], Awaitable[KafkaConnection]]
FetcherKey = tuple[int, int]
"""(leader broker id, fetcher id): Kafka's BrokerIdAndFetcherId."""


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId, `abs(31 * topic.hashCode() +
    partition) % num.replica.fetchers` in Java's 32-bit arithmetic, so a partition is
    fetched by the same fetcher as on a Kafka broker."""
    code = 0
    encoded = tp.topic.encode("utf-16-be")  # String.hashCode runs over UTF-16 units
    for index in range(0, len(encoded), 2):
        code = (31 * code + int.from_bytes(encoded[index : index + 2], "big")) & 0xFFFFFFFF
    mixed = (31 * code + tp.partition) & 0xFFFFFFFF
    signed = mixed - (1 << 32) if mixed >= 1 << 31 else mixed
    return (0 if signed == -(1 << 31) else abs(signed)) % num_fetchers


class ReconnectingFetchSession:
    """`KafkaFetchSession` over a connection made when first needed and made again
    after a request failed as a whole (the fetcher backs off in between)."""

    def __init__(self, connect: Connect, replica_id: int) -> None:
        self._connect = connect
        self._replica_id = replica_id
        self._connection: KafkaConnection | None = None

    async def offsets_for_leader_epoch(
        self, partitions: Mapping[TopicPartition, SendOffsetsForLeaderEpoch]
    ) -> Mapping[TopicPartition, EpochEndOffsetAnswer]:
        return await self._call(lambda s: s.offsets_for_leader_epoch(partitions))

    async def fetch(
        self, partitions: Mapping[TopicPartition, SendFetch], limits: FetchLimits
    ) -> Mapping[TopicPartition, FetchedPartition]:
        return await self._call(lambda s: s.fetch(partitions, limits))

    async def list_offsets(
        self, partitions: Mapping[TopicPartition, SendListOffsets]
    ) -> Mapping[TopicPartition, LeaderOffsets]:
        return await self._call(lambda s: s.list_offsets(partitions))

    async def _call(self, request: Callable[[KafkaFetchSession], Awaitable[T]]) -> T:
        if self._connection is None:
            self._connection = await self._connect()
        try:
            return await request(KafkaFetchSession(self._connection, self._replica_id))
        except SESSION_FAILURES:
            await self.aclose()
            raise
        except trio.Cancelled:  # its answer would be read by the next request: drop it
            await self.aclose()
            raise

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with trio.CancelScope(shield=True):
                await connection.aclose()


class _LeaderFetcher:
    def __init__(self, fetcher: ReplicaFetcher, session: ReconnectingFetchSession) -> None:
        self.fetcher = fetcher
        self.session = session
        self.scope = trio.CancelScope()
        # Partition -> the leader epoch it follows at.
        self.epochs: dict[TopicPartition, int] = {}


class ReplicaFetchers:
    def __init__(
        self,
        node_id: int,
        connector: BrokerConnector,
        applied: trio_util.AsyncValue[HostsImage],
        replica_log: Callable[[str, int], PartitionLog | None],
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
        settings: ReplicaFetcherSettings,
        throttle: ReplicationQuotaManager | None = None,
        num_fetchers: int = 1,
    ) -> None:
        """`applied` is the image the log has applied (so the follower's log exists);
        `replica_log` gives this broker's log of a partition it is a replica of;
        `throttle` is the follower's reassignment throttle, shared by every fetcher;
        `num_fetchers` is `num.replica.fetchers`, the fetchers per leader."""
        self._node_id = node_id
        self._throttle = throttle
        self._connector = connector
        self._num_fetchers = num_fetchers
        self._applied = applied
        self._replica_log = replica_log
        self._live = live_brokers
        self._settings = settings
        self._fetchers: dict[FetcherKey, _LeaderFetcher] = {}
        self._followers: dict[TopicPartition, PartitionFollowerLog] = {}
        self._stopped = False
        self._leaving = False

    def leave_isrs(self) -> None:
        """A controlled shutdown began: keep following each partition while its ISR names
        this broker (acks=all there waits for it), and drop it once the applied state
        shows the controller took this broker out (as Kafka's StopReplica), so no leader
        takes it back in. The leader fences fetches at the old leader epoch meanwhile."""
        self._leaving = True

    def stop(self) -> None:
        """Stop following every partition (the controlled shutdown is over: the broker
        left the ISRs, or gave up)."""
        self._stopped = True
        for leader in self._fetchers.values():
            leader.scope.cancel()
        self._fetchers.clear()

    def failed_partitions_count(self) -> int:
        """Partitions set aside because this broker's log refused the leader's batches
        (Kafka's FailedPartitionsCount): each stays behind until its next leader change."""
        return sum(len(leader.fetcher.failed) for leader in self._fetchers.values())

    def throttle_changed(self) -> None:
        """The follower's throttle rate changed: fetchers asleep over it ask again now."""
        for leader in self._fetchers.values():
            leader.fetcher.wake()

    def follower(self, tp: TopicPartition) -> PartitionFollowerLog | None:
        return self._followers.get(tp)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            try:
                async for image in self._applied.eventual_values():
                    self._follow(image, nursery)
            finally:
                for leader in list(self._fetchers.values()):
                    await leader.session.aclose()

    def _follow(self, image: HostsImage, nursery: trio.Nursery) -> None:
        if self._stopped:
            return
        wanted: dict[TopicPartition, tuple[FetcherKey, int]] = {}
        for name, topic in image.items():
            for index, replicas in topic.assignment.partitions.items():
                state = topic.states.get(index)
                if self._node_id not in replicas or state is None:
                    continue
                if state.leader in (NO_LEADER, self._node_id):
                    continue
                if self._leaving and self._node_id not in state.isr:
                    continue
                tp = TopicPartition(name, index)
                key = (state.leader, fetcher_id(tp, self._num_fetchers))
                wanted[tp] = (key, state.leader_epoch)
        for key, leader in list(self._fetchers.items()):
            for tp in list(leader.epochs):
                if tp not in wanted or wanted[tp][0] != key:
                    leader.fetcher.remove_partition(tp)
                    del leader.epochs[tp]
            if not leader.epochs:
                leader.scope.cancel()
                del self._fetchers[key]
        for tp, (key, epoch) in sorted(wanted.items()):
            partition_log = self._replica_log(tp.topic, tp.partition)
            if partition_log is None:
                continue
            leader = self._fetchers.get(key) or self._start(key, nursery)
            if leader.epochs.get(tp) != epoch:
                follower = self._followers.get(tp)
                if follower is None:
                    follower = self._followers[tp] = PartitionFollowerLog(partition_log)
                leader.fetcher.add_partition(tp, follower, epoch)
                leader.epochs[tp] = epoch
                partition_log.leader_epoch = epoch

    def _start(self, key: FetcherKey, nursery: trio.Nursery) -> _LeaderFetcher:
        leader_id, fetcher = key
        # Answers of up to replica.fetch.response.max.bytes are received into buffers
        # reused from one answer to the next, kept across reconnections.
        frame_buffers = FrameBuffers(keep_bytes=self._settings.limits.response_max_bytes)

        async def connect() -> KafkaConnection:
            # A broker just started may not have read /brokers/ids yet: wait a moment
            # rather than back off a whole replica.fetch.backoff.ms.
            with trio.move_on_after(self._settings.replica_fetch_backoff_ms / 1000):
                await self._live.wait_value(lambda brokers: leader_id in brokers)
            return await self._connector.connect(
                leader_id, f"replica-fetcher-{self._node_id}-{fetcher}", frame_buffers
            )

        session = ReconnectingFetchSession(connect, self._node_id)
        leader = _LeaderFetcher(
            ReplicaFetcher(leader_id, session, self._settings, self._throttle), session
        )
        self._fetchers[key] = leader

        async def run() -> None:
            with leader.scope:
                await leader.fetcher.run()
            await leader.session.aclose()

        nursery.start_soon(run)
        log.info("fetching from broker %d (fetcher %d)", leader_id, fetcher)
        return leader
