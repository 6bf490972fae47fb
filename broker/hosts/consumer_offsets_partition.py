"""`__consumer_offsets`-0 on hosts coordinated through ZooKeeper: where the group
coordinator keeps its state (`GroupMetadataPartition`, broker/coordinator/).

The topic is created the first time a client looks for a coordinator (Kafka's
createTopic on FindCoordinator): one partition, replication factor
min(`offsets.topic.replication.factor`, live brokers), compacted, with
`min.insync.replicas` 2 once there are three replicas (so losing one host still lets
groups commit). Its leader coordinates every group: the replica placement, ISR,
elections and follower truncation are the same as for any topic's partition, so the
state survives whatever a partition's acknowledged records survive. One partition,
not Kafka's 50: every group moves with it at once, and there is no per-partition
loading and unloading of group subsets to get wrong; the cost is that one broker
coordinates every group.

`__transaction_state`-0 is kept the same way (the same class, given the topic, its
`transaction.state.log.replication.factor` and `transaction.state.log.min.isr`): its
leader is the transaction coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import trio
import trio_util

from broker.config import BrokerConfig
from broker.coordination.broker_registration import BrokerRegistration
from broker.coordinator.group_metadata_partition import CONSUMER_OFFSETS, KeyedRecord
from broker.errors import KafkaError
from broker.hosts.partition_leaders import PartitionLeaders
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.batch_checks import iter_batches, read_batch_header
from broker.protocol.record_batch.encoder import encode_batch
from broker.protocol.record_batch.record_sinks import Record, decode_records
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

PARTITION = 0
OFFSETS_PARTITION = TopicPartition(CONSUMER_OFFSETS, PARTITION)
APPEND_TIMEOUT_S = 5.0
"""How long a commit waits for the in-sync replicas (Kafka's offsets.commit.timeout.ms)."""
READ_BYTES = 1024 * 1024
MIN_INSYNC_FROM_REPLICAS = 3
"""With this many replicas, min.insync.replicas is 2; with fewer, 1."""


class ConsumerOffsetsPartition:
    def __init__(
        self,
        config: BrokerConfig,
        logs: ZooKeeperLogManager,
        leaders: PartitionLeaders,
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
        *,
        topic: str = CONSUMER_OFFSETS,
        replication_factor: int | None = None,
        min_insync: int = 2,
    ) -> None:
        """`replication_factor` None: `offsets.topic.replication.factor`; `min_insync`
        applies from three replicas up (1 below)."""
        self._node_id = config.node_id
        self._topic = topic
        self._partition = TopicPartition(topic, PARTITION)
        self._replication_factor = (
            config.groups.offsets_topic_replication_factor
            if replication_factor is None
            else replication_factor
        )
        self._min_insync = min_insync
        self._logs = logs
        self._leaders = leaders
        self._live = live_brokers
        self._wanted = trio.Event()
        self.leadership: trio_util.AsyncValue[int | None] = trio_util.AsyncValue(None)

    def want_topic(self) -> None:
        """A client looks for a coordinator: create the topic if it is not there yet."""
        self._wanted.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._create_when_wanted)
            task_status.started()
            async for leading in self._leaders.leading.eventual_values():
                epoch = leading.get(self._partition)
                if self._logs.replica_log(self._topic, PARTITION) is None:
                    epoch = None
                self.leadership.value = epoch

    async def _create_when_wanted(self) -> None:
        while True:
            await self._wanted.wait()
            if self._logs.topic(self._topic) is None:
                await self._create()
            self._wanted = trio.Event()

    async def _create(self) -> None:
        replicas = max(1, min(self._replication_factor, len(self._live.value)))
        min_insync = min(self._min_insync, replicas) if replicas >= MIN_INSYNC_FROM_REPLICAS else 1
        configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min_insync)}
        try:
            await self._logs.create_topic(self._topic, 1, replicas, configs)
        except KafkaError as exc:
            if exc.error_code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("cannot create %s yet: %s", self._topic, exc.message)
            return
        log.info("created %s with %d replicas", self._topic, replicas)

    # -- GroupMetadataPartition --
    async def read_records(self) -> list[KeyedRecord]:
        partition_log = self._logs.replica_log(self._topic, PARTITION)
        if partition_log is None:
            return []
        records: list[KeyedRecord] = []
        offset = partition_log.log_start_offset
        end = partition_log.log_end_offset
        while offset < end:
            result = await partition_log.read(offset, READ_BYTES, follower=True)
            if not result.records:
                break
            for header, batch in iter_batches(result.records):
                offset = header.last_offset + 1
                if header.is_control:
                    continue
                records.extend(
                    (bytes(r.key), None if r.value is None else bytes(r.value))
                    for r in decode_records(batch, header)
                    if r.key is not None
                )
        return records

    async def append(self, records: Sequence[KeyedRecord]) -> ErrorCode:
        partition_log = self._logs.replica_log(self._topic, PARTITION)
        if partition_log is None or self.leadership.value is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        refused = self._leaders.check_produce(self._topic, PARTITION, -1)
        if refused is not ErrorCode.NONE:
            return refused
        batch = encode_batch(
            [Record(i, 0, bytes(key), value) for i, (key, value) in enumerate(records)]
        )
        try:
            result = await partition_log.append(batch, read_batch_header(batch))
        except KafkaError as exc:
            return exc.error_code
        self._leaders.on_append(self._topic, PARTITION)
        error = await self._leaders.wait_for_acks(
            self._topic, PARTITION, result.last_offset + 1, APPEND_TIMEOUT_S
        )
        if error is not ErrorCode.NONE:
            log.warning(
                "%s-%d: records up to offset %d not acknowledged by the ISR: %s",
                self._topic,
                PARTITION,
                result.last_offset,
                error.name,
            )
        return error
