"""Committed offsets and group records kept in the replicated `__consumer_offsets`
partition instead of journal files (hosts coordinated through ZooKeeper).

The records are keyed as Kafka keys them, so the topic can be compacted: one key per
(group, topic, partition) for an offset, one per group for its GroupMetadata record, and
for a KIP-848 group one per record kind and group (per member for the member records);
deleting an offset or a group writes tombstones. The values are the journal's JSON
records (`offset_store.py`), one offset each, not Kafka's binary schemas: only this
broker reads them.

The in-memory state changes at once (the sans-IO coordinator needs it to), and the
records gather in an open round; `OffsetReplicator` appends one round at a time and
wakes whoever waits on it with the append's error, mapped as Kafka's GroupMetadataManager
maps a failed offset append for the client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from broker.coordinator import consumer_group_records
from broker.coordinator.group_metadata_partition import (
    CONSUMER_OFFSETS,
    GroupMetadataPartition,
    KeyedRecord,
)
from broker.coordinator.offset_store import OffsetState, OffsetStore
from broker.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

OFFSET_KEY = "o"
GROUP_KEY = "g"
CONSUMER_GROUP_KEY = "cg"

RETRIABLE_ON_THE_COORDINATOR = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
"""Append errors a committing client sees as COORDINATOR_NOT_AVAILABLE (Kafka's
storeOffsets): it retries with the same coordinator."""


def _key(*parts: object) -> bytes:
    return json.dumps(parts, separators=(",", ":")).encode()


def _value(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def _consumer_group_key(group: str, key: consumer_group_records.RecordKey) -> bytes:
    return _key(CONSUMER_GROUP_KEY, key[0], group, key[1])


def keyed_records(record: dict[str, Any], state: OffsetState) -> list[KeyedRecord]:
    """A journal record as the partition's keyed records (before `state` applies it)."""
    kind, group = record["t"], record["g"]
    if kind in consumer_group_records.KINDS:
        key = _consumer_group_key(group, consumer_group_records.record_key(record))
        return [(key, None if record["v"] is None else _value(record))]
    if kind == "c":
        return [
            (
                _key(OFFSET_KEY, group, entry[0], entry[1]),
                _value({"t": "c", "g": group, "o": [entry]}),
            )
            for entry in record["o"]
        ]
    tombstones: list[KeyedRecord] = []
    if kind == "d":
        tombstones += [(_key(OFFSET_KEY, group, t, p), None) for t, p in record["p"]]
        return tombstones
    if kind == "x":
        tombstones += [
            (_key(OFFSET_KEY, group, t, p), None) for t, p in state.offsets.get(group, {})
        ]
        tombstones.append((_key(GROUP_KEY, group), None))
        tombstones += [
            (_consumer_group_key(group, key), None) for key in state.consumer_groups.get(group, {})
        ]
        return tombstones
    if kind == "g":
        return [(_key(GROUP_KEY, group), _value(record))]
    raise ValueError(f"unknown offset-store record kind {kind!r}")


def apply_keyed(state: OffsetState, key: bytes, value: bytes | None) -> None:
    """One record of the partition read back (ValueError when it is not ours)."""
    parts = json.loads(key)
    if not isinstance(parts, list) or not parts:
        raise ValueError(f"not a group metadata key: {key!r}")
    if value is not None:
        state.apply(json.loads(value))
    elif parts[0] == OFFSET_KEY:
        _, group, topic, partition = parts
        state.apply({"t": "d", "g": group, "p": [[topic, partition]]})
    elif parts[0] == GROUP_KEY:
        state.groups.pop(str(parts[1]), None)
    elif parts[0] == CONSUMER_GROUP_KEY:
        _, kind, group, member = parts
        state.apply(consumer_group_records.journal_record(str(group), (kind, member), None))
    else:
        raise ValueError(f"not a group metadata key: {key!r}")


class ReplicatedOffsetStore(OffsetStore):
    """An `OffsetStore` whose records go to `sink` (the replicator) instead of a journal."""

    def __init__(self, sink: Callable[[list[KeyedRecord]], None]) -> None:
        super().__init__(Path(CONSUMER_OFFSETS))
        self._sink = sink

    def load(self) -> None:
        return None

    def reset(self, records: Iterable[KeyedRecord] = ()) -> int:
        """Forget the state and rebuild it from the partition's records; returns how
        many were not ours and skipped."""
        self.state = OffsetState()
        skipped = 0
        for key, value in records:
            try:
                apply_keyed(self.state, key, value)
            except (ValueError, KeyError, TypeError) as exc:
                skipped += 1
                log.warning("skipping a record of %s that is not ours: %s", CONSUMER_OFFSETS, exc)
        return skipped

    def _append(self, record: dict[str, Any]) -> None:
        keyed = keyed_records(record, self.state)
        self.state.apply(record)
        self._sink(keyed)

    def needs_snapshot(self) -> bool:
        return False

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


@attrs.define
class AppendRound:
    """Records appended together; `error` is set before `done`."""

    records: list[KeyedRecord] = attrs.Factory(list)
    done: trio.Event = attrs.Factory(trio.Event)
    error: ErrorCode = ErrorCode.NONE

    def finish(self, error: ErrorCode) -> None:
        self.error = error
        self.done.set()

    async def client_error(self) -> ErrorCode:
        """What a committing client is told once the round is appended."""
        await self.done.wait()
        if self.error is ErrorCode.NONE:
            return ErrorCode.NONE
        if self.error in RETRIABLE_ON_THE_COORDINATOR:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NOT_COORDINATOR


class OffsetReplicator:
    """Appends the store's records to the partition, one round at a time, in order."""

    def __init__(self, partition: GroupMetadataPartition) -> None:
        self._partition = partition
        self._open: AppendRound | None = None
        self._appending: AppendRound | None = None
        self._wake = trio.Event()

    def enqueue(self, records: Sequence[KeyedRecord]) -> None:
        if not records:
            return
        if self._open is None:
            self._open = AppendRound()
        self._open.records.extend(records)
        self._wake.set()

    def pending(self) -> AppendRound | None:
        """The round the records enqueued last belong to (None: nothing waits)."""
        return self._open

    def last_written(self) -> AppendRound | None:
        """The round holding the last record written, open or being appended (None: all
        are appended). Kafka answers an operation that wrote nothing once the records
        written before it are committed, since its answer may rest on them."""
        return self._open or self._appending

    def drop_pending(self) -> None:
        """Leadership lost: the records not yet appended are the new leader's to lose."""
        if self._open is not None:
            self._open.finish(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._open = None

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            current, self._open = self._open, None
            if current is None:
                continue
            self._appending = current
            try:
                error = await self._partition.append(current.records)
            finally:
                self._appending = None
            if error is not ErrorCode.NONE:
                log.warning(
                    "%d group metadata records not replicated: %s", len(current.records), error.name
                )
            current.finish(error)
