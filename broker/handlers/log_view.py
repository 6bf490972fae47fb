"""The part of the log's interface (docs/design/log-api.md) the API handlers rely on.

Handlers are typed against these protocols rather than `broker.log`'s classes so
that they can be unit-tested against an in-memory fake, and so that the log is
free to change anything the handlers do not use.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import trio

from broker.protocol.record_batch.validator import ClientAppend
from broker.protocol.records import RecordBatchHeader


class AppendResultView(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def log_append_time_ms(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def duplicate(self) -> bool: ...


class ReadResultView(Protocol):
    @property
    def records(self) -> bytes | memoryview: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def aborted_transactions(self) -> Sequence[AbortedTxnView] | None: ...


class AbortedTxnView(Protocol):
    @property
    def producer_id(self) -> int: ...
    @property
    def first_offset(self) -> int: ...


class PartitionView(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...

    async def append(
        self,
        batch: bytes | bytearray | memoryview,
        header: RecordBatchHeader,
        client: ClientAppend | None = None,
        *,
        log_append_time: bool = False,
    ) -> AppendResultView: ...

    async def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool = True,
        read_committed: bool = False,
        follower: bool = False,
    ) -> ReadResultView: ...

    def data_appended(self) -> trio.Event: ...

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...

    def max_timestamp(self) -> tuple[int, int]: ...

    async def delete_records_before(self, offset: int) -> int: ...


class TopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partitions(self) -> Sequence[PartitionView]: ...
    @property
    def is_internal(self) -> bool: ...

    def configs(self) -> Mapping[str, str]: ...

    def config(self, key: str) -> str: ...


class LogManagerView(Protocol):
    auto_create_topics: bool
    default_partitions: int

    def topics(self) -> Mapping[str, TopicView]: ...

    def topic(self, name: str) -> TopicView | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicView | None: ...

    def partition(self, topic: str, partition: int) -> PartitionView | None: ...

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicView: ...

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> None: ...

    async def alter_topic_configs(
        self,
        name: str,
        set_: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        replace_all: bool = False,
        validate_only: bool = False,
    ) -> None: ...

    def topic_config_defaults(self) -> Mapping[str, str]: ...

    async def allocate_producer_id(self) -> int: ...
