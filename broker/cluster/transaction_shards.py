"""Transaction state across a change of the process count.

Kafka keeps it in `__transaction_state`, whose partitions move between brokers
with their data; a transactional id belongs to partition
`abs(javaHashCode(id)) % partitions`. Here each process coordinates the ids
that hash to its index (the groups' rule, broker/cluster/placement.py) and
journals them in `transaction-coordinator/shard-<i>/` of the first log dir (a
single process keeps `transaction-state.journal` in the log dir itself). When
the count changes, the supervisor re-shards before any process starts: every
journal is merged (for an id found twice, the most recently updated record
wins) and written out as one compact journal per new shard, swapping
directories so that a crash leaves the old or the new layout.

A transaction open across the change moves with its state: its new
coordinator finishes it if it was prepared (writing the markers again), or
aborts it when its `transaction.timeout.ms` runs out, unless the producer ends
it first (its client finds the new coordinator with FindCoordinator).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from broker.cluster.placement import coordinator_shard
from broker.cluster.shard_layout import ShardLayout
from broker.transaction.transaction_log import JOURNAL_NAME, TransactionLog
from broker.transaction.transaction_metadata import TransactionMetadata

log = logging.getLogger(__name__)

SHARDS = "transaction-coordinator"


def transaction_shard_dir(log_dir: Path, shard: int) -> Path:
    return ShardLayout(log_dir, SHARDS).shard_dir(shard)


def _load(directory: Path, merged: dict[str, TransactionMetadata]) -> None:
    journal = TransactionLog(directory)
    try:
        for tid, metadata in journal.load().items():
            known = merged.get(tid)
            if known is None or metadata.last_update_ms >= known.last_update_ms:
                merged[tid] = metadata
    finally:
        journal.close()


def _write(directory: Path, entries: list[TransactionMetadata]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    TransactionLog(directory).write_snapshot(entries)


def reshard_transaction_state(log_dir: Path, shards: int) -> bool:
    """Bring the transaction state's layout to `shards` processes; True when it moved."""
    if not log_dir.is_dir():
        return False
    layout = ShardLayout(log_dir, SHARDS)
    layout.finish_interrupted()
    single = log_dir / JOURNAL_NAME
    existing = layout.shard_dirs()
    if shards == 1 and not existing:
        return False
    if shards > 1 and not single.exists() and set(existing) in (set(range(shards)), set()):
        return False
    merged: dict[str, TransactionMetadata] = {}
    if single.exists():
        _load(log_dir, merged)
    for _, directory in sorted(existing.items()):
        _load(directory, merged)
    staging = layout.staging
    if shards == 1:
        _write(staging, list(merged.values()))
        os.replace(staging / JOURNAL_NAME, single)
        shutil.rmtree(layout.root, ignore_errors=True)
    else:
        for shard in range(shards):
            _write(
                staging / f"shard-{shard}",
                [m for tid, m in merged.items() if coordinator_shard(tid, shards) == shard],
            )
        layout.swap_in_staged()
        single.unlink(missing_ok=True)
        layout.drop_old()
    shutil.rmtree(staging, ignore_errors=True)
    log.info(
        "re-sharded the state of %d transactional ids over %d process(es)", len(merged), shards
    )
    return True
