"""A partition another broker (or cluster process) leads: it holds the place of the log
in its topic.

Handlers find partitions by index in their topic; in a cluster a process has a
`RemotePartition` where it is not the leader, so everything but the leader's
data answers as usual, and every data operation is refused with
NOT_LEADER_OR_FOLLOWER, which makes a Kafka client refresh its metadata and go
to the leader. It owns no file.
"""

from __future__ import annotations

from pathlib import Path

from broker.errors import KafkaError
from broker.log.log_config import LogConfig
from broker.log.partition_log import PartitionLog
from broker.log.results import AppendResult, ReadResult
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch.validator import ClientAppend
from broker.protocol.records import RecordBatchHeader


class RemotePartition(PartitionLog):
    def __init__(self, topic: str, partition: int, leader: int, config: LogConfig) -> None:
        super().__init__(
            topic,
            partition,
            Path(f"/nonexistent/{topic}-{partition}"),
            config,
            clock=lambda: 0,
            segments=[],
            log_start_offset=0,
            recovery_point=0,
        )
        self.leader = leader

    def _refuse(self) -> KafkaError:
        return KafkaError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"{self.topic}-{self.partition} is led by broker {self.leader}",
        )

    @property
    def log_end_offset(self) -> int:
        raise self._refuse()

    @property
    def size_bytes(self) -> int:
        return 0

    @property
    def has_unflushed_data(self) -> bool:
        return False

    async def append(
        self,
        batch: bytes | bytearray | memoryview,
        header: RecordBatchHeader,
        client: ClientAppend | None = None,
        *,
        log_append_time: bool = False,
    ) -> AppendResult:
        raise self._refuse()

    async def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool = True,
        read_committed: bool = False,
        follower: bool = False,
    ) -> ReadResult:
        raise self._refuse()

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        raise self._refuse()

    def max_timestamp(self) -> tuple[int, int]:
        raise self._refuse()

    async def delete_records_before(self, offset: int) -> int:
        raise self._refuse()

    async def flush(self, to_offset: int | None = None) -> None:
        return None

    async def apply_retention(self, now_ms: int) -> int:
        return 0

    def close(self, *, clean: bool) -> None:
        return None

    def __repr__(self) -> str:
        return f"RemotePartition({self.topic}-{self.partition}, leader={self.leader})"
