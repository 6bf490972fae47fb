"""An in-memory stand-in for the log, for unit tests of handler logic."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import attrs
import trio

from broker.errors import KafkaError
from broker.protocol import records as rec
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.validator import ClientAppend, LogValidator


@attrs.frozen
class Appended:
    base_offset: int
    last_offset: int
    log_append_time_ms: int = -1
    log_start_offset: int = 0
    duplicate: bool = False


@attrs.frozen
class AbortedTxn:
    producer_id: int
    first_offset: int


@attrs.frozen
class Read:
    records: bytes
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


class FakePartition:
    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.leader_epoch = 0
        self.log_start_offset = 0
        self.batches: list[bytes] = []
        self.reads: list[tuple[int, int, bool]] = []
        self._event = trio.Event()

    @property
    def log_end_offset(self) -> int:
        if not self.batches:
            return 0
        return rec.read_batch_header(self.batches[-1]).last_offset + 1

    async def append(
        self,
        batch: bytes | bytearray | memoryview,
        header: rec.RecordBatchHeader,
        client: ClientAppend | None = None,
        *,
        log_append_time: bool = False,
    ) -> Appended:
        if client is not None:
            # The real log's order: batch checks, the request's checks, record checks.
            LogValidator().check_batch(batch, header)
            if client.before_records is not None:
                await client.before_records(header)
        base = self.log_end_offset
        data = bytearray(bytes(batch))
        rec.set_base_offset(data, 0, base)
        self.batches.append(bytes(data))
        self._event.set()
        self._event = trio.Event()
        return Appended(base, base + header.last_offset_delta)

    @property
    def last_stable_offset(self) -> int:
        return self.log_end_offset

    async def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool = True,
        read_committed: bool = False,
        follower: bool = False,
    ) -> Read:
        self.reads.append((offset, max_bytes, min_one_batch))
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        out = b""
        for data in self.batches:
            if rec.read_batch_header(data).last_offset < offset:
                continue
            if len(out) + len(data) > max_bytes and not (min_one_batch and not out):
                break
            out += data
        end = self.log_end_offset
        return Read(out, end, self.log_start_offset, end, () if read_committed else None)

    def data_appended(self) -> trio.Event:
        return self._event

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        return None

    def max_timestamp(self) -> tuple[int, int]:
        return (-1, -1)

    async def delete_records_before(self, offset: int) -> int:
        self.log_start_offset = offset
        return offset


class FakeTopic:
    def __init__(
        self, name: str, partitions: int, overrides: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.topic_id = uuid.uuid4()
        self.partitions = [FakePartition(name, i) for i in range(partitions)]
        self.is_internal = False
        self.overrides = dict(overrides or {})

    def configs(self) -> Mapping[str, str]:
        return self.overrides

    def config(self, key: str) -> str:
        return self.overrides.get(key, DEFAULTS[key])


DEFAULTS = {
    "max.message.bytes": "1048588",
    "segment.bytes": "1073741824",
    "min.insync.replicas": "1",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": str(2**63 - 1),
    "message.timestamp.after.max.ms": str(2**63 - 1),
    "retention.ms": "604800000",
    "cleanup.policy": "delete",
}


class FakeLog:
    def __init__(self, *topics: FakeTopic) -> None:
        self.auto_create_topics = True
        self.default_partitions = 1
        self._topics = {t.name: t for t in topics}
        self.producer_ids = 0

    def topics(self) -> Mapping[str, FakeTopic]:
        return self._topics

    def topic(self, name: str) -> FakeTopic | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> FakeTopic | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def partition(self, topic: str, partition: int) -> FakePartition | None:
        found = self._topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return None
        return found.partitions[partition]

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> FakeTopic:
        topic = FakeTopic(name, num_partitions, configs)
        if not validate_only:
            self._topics[name] = topic
        return topic

    async def delete_topic(self, name: str) -> None:
        del self._topics[name]

    async def create_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> None:
        raise NotImplementedError

    async def alter_topic_configs(
        self,
        name: str,
        set_: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        replace_all: bool = False,
        validate_only: bool = False,
    ) -> None:
        raise NotImplementedError

    def topic_config_defaults(self) -> Mapping[str, str]:
        return DEFAULTS

    async def allocate_producer_id(self) -> int:
        self.producer_ids += 1
        return self.producer_ids
