"""The offsets a group coordinator holds for open transactions: durable, fenced by the
epoch of the transaction's marker, the journal kept small."""

from __future__ import annotations

from pathlib import Path

from broker.coordinator.pending_txn_offsets import PendingTransactionalOffsets


def test_a_zombie_instance_cannot_leave_offsets_after_its_transaction_was_aborted(
    tmp_path: Path,
) -> None:
    held = PendingTransactionalOffsets(tmp_path)
    held.load()
    assert held.add("group", 7, 3, {("in", 0): (10, -1, "")})
    held.forget(7, 4)  # the abort marker of a fencing: epoch 4
    assert held.pending_partitions("group") == set()
    # The fenced instance (epoch 3) is refused; the new one (epoch 5) and the same
    # epoch as the marker's (a plain commit does not bump it) are accepted.
    assert not held.add("group", 7, 3, {("in", 0): (11, -1, "")})
    assert held.pending_partitions("group") == set()
    assert held.add("group", 7, 4, {("in", 0): (12, -1, "")})
    assert held.add("group", 7, 5, {("in", 0): (13, -1, "")})
    assert not held.add("group", 7, 4, {("in", 0): (14, -1, "")})
    held.close()
    reloaded = PendingTransactionalOffsets(tmp_path)
    reloaded.load()
    reloaded.close()
    assert reloaded.offsets_of(7) == {"group": {("in", 0): (13, -1, "")}}


def test_the_pending_offsets_journal_is_emptied_once_nothing_is_pending(tmp_path: Path) -> None:
    held = PendingTransactionalOffsets(tmp_path)
    held.load()
    metadata = "m" * 1000
    assert held.add("group", 9999, 0, {("in", 1): (1, -1, "")})  # pending all along
    for producer_id in range(1500):
        assert held.add("group", producer_id, 0, {("in", 0): (producer_id, -1, metadata)})
        held.forget(producer_id, 0)
    assert held.path.stat().st_size > 1024 * 1024
    held.forget(9999, 0)
    assert held.path.stat().st_size == 0
    assert held.add("group", 2000, 0, {("in", 0): (7, -1, "")})
    held.close()
    reloaded = PendingTransactionalOffsets(tmp_path)
    reloaded.load()
    reloaded.close()
    assert reloaded.offsets_of(2000) == {"group": {("in", 0): (7, -1, "")}}
    assert reloaded.pending_partitions("group") == {("in", 0)}
