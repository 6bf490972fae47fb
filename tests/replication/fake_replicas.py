"""In-memory logs and a leader answering a follower's requests, for the Trio
components of replication (the fetcher, the leader's partition)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import trio

from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import Record, encode_batch, iter_batches
from broker.replication.fetch_divergence import diverging_epoch
from broker.replication.fetched_records import FetchedBatches
from broker.replication.fetcher_partition_state import (
    SendFetch,
    SendListOffsets,
    SendOffsetsForLeaderEpoch,
)
from broker.replication.leader_epoch_cache import LeaderEpochCache
from broker.replication.leader_epoch_check import check_current_leader_epoch
from broker.replication.leader_fetch_session import (
    EpochEndOffsetAnswer,
    FetchedPartition,
    FetchLimits,
    LeaderOffsets,
)
from broker.replication.topic_partition import TopicPartition

# Fixed, so that the same records written to two logs are the same bytes.
TIMESTAMP_MS = 1_700_000_000_000


@attrs.frozen
class StoredBatch:
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes


class MemoryLog:
    """A FollowerLog in memory; also the leader's log, appending as a leader does."""

    def __init__(self) -> None:
        self.batches: list[StoredBatch] = []
        self._epoch_cache = LeaderEpochCache()
        self._log_start_offset = 0
        self._high_watermark = 0
        self.appended = trio.Event()

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    def append_as_leader(self, epoch: int, *values: bytes) -> int:
        """One batch of `values` stamped with `epoch`; the new log end."""
        records = [Record(i, 0, None, v) for i, v in enumerate(values)]
        base = self.log_end_offset
        data = encode_batch(
            records, base_offset=base, partition_leader_epoch=epoch, base_timestamp=TIMESTAMP_MS
        )
        self.batches.append(StoredBatch(base, base + len(values) - 1, epoch, data))
        self._epoch_cache.assign(epoch, base)
        self._wake()
        return self.log_end_offset

    async def append_as_follower(self, batches: FetchedBatches) -> None:
        for header, data in iter_batches(batches.records):
            assert header.base_offset == self.log_end_offset, "appends continue the log"
            self.batches.append(
                StoredBatch(
                    header.base_offset,
                    header.last_offset,
                    header.partition_leader_epoch,
                    bytes(data),
                )
            )
        for start in batches.epoch_starts:
            self._epoch_cache.assign(start.epoch, start.start_offset)
        self._wake()

    async def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            return
        assert all(b.last_offset < offset or b.base_offset >= offset for b in self.batches)
        self.batches = [b for b in self.batches if b.base_offset < offset]
        self._epoch_cache.truncate_from_end(offset)
        self._high_watermark = min(self._high_watermark, offset)

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        self.batches = []
        self._epoch_cache = LeaderEpochCache()
        self._log_start_offset = offset
        self._high_watermark = offset

    def update_high_watermark(self, high_watermark: int) -> None:
        self._high_watermark = high_watermark

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`, at least one."""
        out = b""
        for batch in self.batches:
            if batch.last_offset < offset:
                continue
            if out and len(out) + len(batch.data) > max_bytes:
                break
            out += batch.data
        return out

    def contents(self) -> list[tuple[int, int, bytes]]:
        """(base offset, epoch, bytes) of every batch: equal logs, equal contents."""
        return [(b.base_offset, b.epoch, b.data) for b in self.batches]

    def _wake(self) -> None:
        event, self.appended = self.appended, trio.Event()
        event.set()


class FailingRequest(ConnectionError):
    pass


class FakeLeader:
    """A LeaderFetchSession answered from the leader's own logs, as its broker would.

    `failures` requests fail as a whole first (the connection lost); `calls` keeps
    the time of every request, for the back-off checks."""

    def __init__(
        self,
        logs: Mapping[TopicPartition, MemoryLog],
        leader_epochs: Mapping[TopicPartition, int],
        *,
        failures: int = 0,
    ) -> None:
        self.logs = dict(logs)
        self.leader_epochs = dict(leader_epochs)
        self.failures = failures
        self.calls: list[tuple[str, float]] = []

    def _call(self, name: str) -> None:
        self.calls.append((name, trio.current_time()))
        if self.failures > 0:
            self.failures -= 1
            raise FailingRequest(f"{name}: connection reset")

    def _epoch_error(self, tp: TopicPartition, current_leader_epoch: int) -> ErrorCode:
        if tp not in self.logs:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return check_current_leader_epoch(current_leader_epoch, self.leader_epochs[tp])

    async def offsets_for_leader_epoch(
        self, partitions: Mapping[TopicPartition, SendOffsetsForLeaderEpoch]
    ) -> Mapping[TopicPartition, EpochEndOffsetAnswer]:
        self._call("OffsetsForLeaderEpoch")
        answers = {}
        for tp, request in partitions.items():
            error = self._epoch_error(tp, request.current_leader_epoch)
            log = self.logs.get(tp)
            end = (
                log.epoch_cache.end_offset_for(request.leader_epoch, log.log_end_offset)
                if log is not None and error is ErrorCode.NONE
                else LeaderEpochCache().end_offset_for(-1, 0)
            )
            answers[tp] = EpochEndOffsetAnswer(error, end)
        await trio.lowlevel.checkpoint()
        return answers

    async def fetch(
        self, partitions: Mapping[TopicPartition, SendFetch], limits: FetchLimits
    ) -> Mapping[TopicPartition, FetchedPartition]:
        self._call("Fetch")
        with trio.move_on_after(limits.max_wait_ms / 1000):
            while not any(self._has_data(tp, r) for tp, r in partitions.items()):
                events = [self.logs[tp].appended for tp in partitions if tp in self.logs]
                if not events:
                    await trio.sleep_forever()
                await events[0].wait()  # one partition in these tests' long polls
        return {tp: self._fetch_one(tp, r, limits) for tp, r in partitions.items()}

    def _has_data(self, tp: TopicPartition, request: SendFetch) -> bool:
        log = self.logs.get(tp)
        return log is None or request.fetch_offset != log.log_end_offset

    def _fetch_one(
        self, tp: TopicPartition, request: SendFetch, limits: FetchLimits
    ) -> FetchedPartition:
        error = self._epoch_error(tp, request.current_leader_epoch)
        if error is not ErrorCode.NONE:
            return FetchedPartition(error)
        log = self.logs[tp]
        if not log.log_start_offset <= request.fetch_offset <= log.log_end_offset:
            return FetchedPartition(ErrorCode.OFFSET_OUT_OF_RANGE)
        diverged = diverging_epoch(
            log.epoch_cache, log.log_end_offset, request.fetch_offset, request.last_fetched_epoch
        )
        if diverged is not None:
            return FetchedPartition(ErrorCode.NONE, log.high_watermark, diverging_epoch=diverged)
        records = log.read(request.fetch_offset, limits.partition_max_bytes)
        return FetchedPartition(ErrorCode.NONE, log.high_watermark, records)

    async def list_offsets(
        self, partitions: Mapping[TopicPartition, SendListOffsets]
    ) -> Mapping[TopicPartition, LeaderOffsets]:
        self._call("ListOffsets")
        answers = {}
        for tp, request in partitions.items():
            error = self._epoch_error(tp, request.current_leader_epoch)
            log = self.logs.get(tp)
            if log is None or error is not ErrorCode.NONE:
                answers[tp] = LeaderOffsets(error)
            else:
                answers[tp] = LeaderOffsets(error, log.log_start_offset, log.log_end_offset)
        await trio.lowlevel.checkpoint()
        return answers
