"""Transaction state, and the offsets groups hold for open transactions, survive a change
of the process count (re-sharding at start-up)."""

from __future__ import annotations

from pathlib import Path

from broker.cluster.group_shards import reshard_group_offsets
from broker.cluster.member import shard_dir
from broker.cluster.placement import coordinator_shard
from broker.cluster.transaction_shards import (
    reshard_transaction_state,
    transaction_shard_dir,
)
from broker.coordinator.pending_txn_offsets import PendingTransactionalOffsets
from broker.transaction.transaction_log import TransactionLog
from broker.transaction.transaction_metadata import TransactionMetadata
from broker.transaction.transaction_state import TransactionState

IDS = [f"tid-{i}" for i in range(30)]


def metadata_of(tid: str, *, update_ms: int = 1000) -> TransactionMetadata:
    number = int(tid.split("-")[1])
    metadata = TransactionMetadata(tid, 5000 + number, number % 7, 60_000)
    if number % 3 == 0:  # an open transaction: it must move with its partitions
        metadata.state = TransactionState.ONGOING
        metadata.partitions = {("orders", number % 4)}
        metadata.groups = {f"g-{number}"}
        metadata.start_ms = 900
    metadata.last_update_ms = update_ms
    return metadata


def write_journal(directory: Path, entries: list[TransactionMetadata]) -> None:
    journal = TransactionLog(directory)
    journal.load()
    for metadata in entries:
        journal.write(metadata)
    journal.close()


def read(directory: Path) -> dict[str, TransactionMetadata]:
    journal = TransactionLog(directory)
    state = journal.load()
    journal.close()
    return state


def records(state: dict[str, TransactionMetadata]) -> dict[str, object]:
    return {tid: m.to_record() for tid, m in state.items()}


def test_transaction_state_moves_to_the_shard_of_each_id_and_back(tmp_path: Path) -> None:
    write_journal(tmp_path, [metadata_of(t) for t in IDS])
    expected = records({t: metadata_of(t) for t in IDS})
    assert reshard_transaction_state(tmp_path, 3)
    assert not (tmp_path / "transaction-state.journal").exists()
    for shard in range(3):
        state = read(transaction_shard_dir(tmp_path, shard))
        assert set(state) == {t for t in IDS if coordinator_shard(t, 3) == shard}
        assert records(state) == {t: expected[t] for t in state}
    # A change made while three processes ran, then two processes, then one.
    owner = transaction_shard_dir(tmp_path, coordinator_shard("tid-4", 3))
    newer = metadata_of("tid-4", update_ms=2000)
    newer.producer_epoch = 6
    write_journal(owner, [newer])
    assert reshard_transaction_state(tmp_path, 2)
    assert not transaction_shard_dir(tmp_path, 2).exists()
    for shard in range(2):
        state = read(transaction_shard_dir(tmp_path, shard))
        assert set(state) == {t for t in IDS if coordinator_shard(t, 2) == shard}
    assert reshard_transaction_state(tmp_path, 1)
    single = read(tmp_path)
    assert set(single) == set(IDS)
    assert single["tid-4"].producer_epoch == 6
    assert single["tid-3"].state is TransactionState.ONGOING
    assert single["tid-3"].partitions == {("orders", 3)}
    assert not (tmp_path / "transaction-coordinator").exists()


def test_nothing_moves_when_the_transaction_layout_already_fits(tmp_path: Path) -> None:
    assert not reshard_transaction_state(tmp_path, 1)
    assert not reshard_transaction_state(tmp_path, 3)
    write_journal(tmp_path, [metadata_of(t) for t in IDS])
    assert not reshard_transaction_state(tmp_path, 1)
    assert reshard_transaction_state(tmp_path, 4)
    assert not reshard_transaction_state(tmp_path, 4)
    assert not reshard_transaction_state(tmp_path / "not-created-yet", 2)


def test_an_interrupted_transaction_reshard_is_redone(tmp_path: Path) -> None:
    write_journal(tmp_path, [metadata_of(t) for t in IDS])
    (tmp_path / "transaction-coordinator.new" / "shard-0").mkdir(parents=True)
    assert reshard_transaction_state(tmp_path, 2)
    assert not (tmp_path / "transaction-coordinator.new").exists()
    total = set().union(*(read(transaction_shard_dir(tmp_path, s)) for s in range(2)))
    assert total == set(IDS)


def test_offsets_held_for_open_transactions_move_with_their_group(tmp_path: Path) -> None:
    groups = [f"group-{i}" for i in range(12)]
    held = PendingTransactionalOffsets(tmp_path)
    held.load()
    for i, group in enumerate(groups):
        assert held.add(group, 700 + i % 3, 2, {("in", i): (i * 10, -1, f"m{i}")})
    held.close()
    assert reshard_group_offsets(tmp_path, 3)
    for shard in range(3):
        moved = PendingTransactionalOffsets(shard_dir(tmp_path, shard))
        moved.load()
        moved.close()
        for i, group in enumerate(groups):
            expected = {("in", i)} if coordinator_shard(group, 3) == shard else set()
            assert moved.pending_partitions(group) == expected
    assert reshard_group_offsets(tmp_path, 1)
    back = PendingTransactionalOffsets(tmp_path)
    back.load()
    assert back.offsets_of(701) == {
        g: {("in", i): (i * 10, -1, f"m{i}")} for i, g in enumerate(groups) if i % 3 == 1
    }
    back.forget(701, 2)
    back.close()
    reloaded = PendingTransactionalOffsets(tmp_path)
    reloaded.load()
    reloaded.close()
    assert reloaded.offsets_of(701) == {}
    assert reloaded.pending_partitions("group-0") == {("in", 0)}
