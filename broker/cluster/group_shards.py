"""Committed offsets across a change of the process count.

Kafka keeps offsets in `__consumer_offsets`, whose partitions move between
brokers with their data. Here each process coordinates the groups whose hash
falls on its index and keeps their journal in `group-coordinator/shard-<i>/`
of the first log dir (a single process keeps its journal in the log dir
itself, as before). When the count changes, the supervisor re-shards before
any process starts: it merges every existing journal (the single-process one
first, so shards win) and writes one snapshot per new shard, swapping
directories so that a crash at any point leaves the old or the new layout.
Offsets held for open transactions (pending-transactional-offsets.journal)
move with their group the same way.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from broker.cluster.placement import coordinator_shard
from broker.cluster.shard_layout import ShardLayout
from broker.coordinator.offset_store import (
    JOURNAL_PREFIX,
    JOURNAL_SUFFIX,
    SNAPSHOT_NAME,
    OffsetState,
    OffsetStore,
)
from broker.coordinator.pending_txn_offsets import PENDING_JOURNAL, PendingTransactionalOffsets
from broker.log.log_manager import LOCK_FILE

log = logging.getLogger(__name__)

SHARDS = "group-coordinator"


def _legacy_files(log_dir: Path) -> list[Path]:
    return [
        p
        for p in log_dir.iterdir()
        if p.name in (SNAPSHOT_NAME, PENDING_JOURNAL)
        or (p.name.startswith(JOURNAL_PREFIX) and p.name.endswith(JOURNAL_SUFFIX))
    ]


def _load(directory: Path, merged: OffsetState, pending: list[dict[str, Any]]) -> None:
    store = OffsetStore(directory)
    store.load()
    try:
        for record in store.state.to_records():
            merged.apply(record)
    finally:
        store.close()
    held = PendingTransactionalOffsets(directory)
    held.replay()
    pending += held.records()


def _write(
    directory: Path, state: OffsetState, groups: list[str], pending: list[dict[str, Any]]
) -> None:
    mine = set(groups)
    PendingTransactionalOffsets(directory).write_snapshot(
        [r for r in pending if r["group"] in mine]
    )
    store = OffsetStore(directory)
    store.load()
    for group in groups:
        record = state.groups.get(group)
        if record is not None:
            store.set_group_record(group, record)
        offsets = state.offsets.get(group)
        if offsets:
            store.commit(group, dict(offsets))
    store.snapshot()
    store.close()


def reshard_group_offsets(log_dir: Path, shards: int) -> bool:
    """Bring the offsets layout to `shards` processes; True when anything moved."""
    if not log_dir.is_dir():
        return False
    layout = ShardLayout(log_dir, SHARDS)
    layout.finish_interrupted()
    legacy = _legacy_files(log_dir)
    existing = layout.shard_dirs()
    if shards == 1 and not existing:
        return False
    if shards > 1 and not legacy and set(existing) == set(range(shards)):
        return False
    if shards > 1 and not legacy and not existing:
        return False
    merged = OffsetState()
    pending: list[dict[str, Any]] = []
    if legacy:
        _load(log_dir, merged, pending)
    for _, directory in sorted(existing.items()):
        _load(directory, merged, pending)
    groups = sorted(set(merged.offsets) | set(merged.groups) | {r["group"] for r in pending})
    staging = layout.staging
    if shards == 1:
        _write(staging / "single", merged, groups, pending)
        for path in legacy:
            path.unlink()
        os.replace(staging / "single" / SNAPSHOT_NAME, log_dir / SNAPSHOT_NAME)
        os.replace(staging / "single" / PENDING_JOURNAL, log_dir / PENDING_JOURNAL)
        shutil.rmtree(layout.root, ignore_errors=True)
    else:
        for shard in range(shards):
            mine = [g for g in groups if coordinator_shard(g, shards) == shard]
            _write(staging / f"shard-{shard}", merged, mine, pending)
        layout.swap_in_staged()
        for path in legacy:
            path.unlink()
        layout.drop_old()
    shutil.rmtree(staging, ignore_errors=True)
    log.info("re-sharded the offsets of %d groups over %d process(es)", len(groups), shards)
    return True


def reshard_for_single_process(log_dir: Path) -> bool:
    """Before a single process starts: merge a cluster's shards back (group offsets and
    transaction state), unless the log dir
    is in use (then the broker's own lock reports that, and nothing is touched)."""
    if not log_dir.is_dir():
        return False
    fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        from broker.cluster.transaction_shards import reshard_transaction_state

        moved = reshard_group_offsets(log_dir, 1)
        return reshard_transaction_state(log_dir, 1) or moved
    finally:
        os.close(fd)
