"""The transaction coordinator's decisions: epochs and fencing, the steps of a
transaction, markers, timeouts, expiry, and its journal across restarts."""

from __future__ import annotations

from pathlib import Path

from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_coordinator import TransactionCoordinator
from broker.transaction.transaction_log import JOURNAL_NAME
from broker.transaction.transaction_state import TransactionState
from tests.transaction.helpers import (
    Clock,
    RecordingMarkers,
    RecordingOffsets,
    make_coordinator,
    txn_offset_commit,
)


def state_of(coordinator: TransactionCoordinator, transactional_id: str) -> TransactionState:
    """Read through a call: mypy keeps an `is` narrowing across the awaits that move it."""
    return coordinator.transactions[transactional_id].state


E = ErrorCode


async def test_init_gives_a_new_id_epoch_zero_then_bumps_the_epoch(tmp_path: Path) -> None:
    c = make_coordinator(tmp_path)
    first = await c.init_producer_id("tx", 10_000)
    second = await c.init_producer_id("tx", 10_000)
    other = await c.init_producer_id("other", 10_000)
    assert (first.error, first.producer_epoch) == (E.NONE, 0)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert other.producer_id != first.producer_id


async def test_a_timeout_above_the_maximum_is_refused(tmp_path: Path) -> None:
    c = make_coordinator(tmp_path, max_timeout_ms=5000)
    assert (await c.init_producer_id("tx", 5001)).error == E.INVALID_TRANSACTION_TIMEOUT
    assert (await c.init_producer_id("tx", 5000)).error == E.NONE


async def test_commit_writes_commit_markers_to_every_partition_and_the_offsets(
    tmp_path: Path,
) -> None:
    offsets = RecordingOffsets()
    markers = RecordingMarkers(offsets)
    c = make_coordinator(tmp_path, markers=markers, offsets=offsets)
    init = await c.init_producer_id("tx", 10_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await c.add_partitions("tx", pid, epoch, [("a", 0), ("b", 1)]) == E.NONE
    assert await c.add_offsets("tx", pid, epoch, "g") == E.NONE
    assert txn_offset_commit(c, markers, "tx", pid, epoch, "g", {("in", 0): (42, -1, "")}) == E.NONE
    assert markers.pending_offsets("g") == {("in", 0)}
    assert offsets.committed == {}
    assert await c.end_txn("tx", pid, epoch, True) == E.NONE
    assert markers.markers == {("a", 0): [(pid, epoch, True)], ("b", 1): [(pid, epoch, True)]}
    assert offsets.committed == {"g": {("in", 0): (42, -1, "")}}
    assert markers.pending_offsets("g") == set()
    assert c.transactions["tx"].state is TransactionState.COMPLETE_COMMIT
    # A retried EndTxn(commit) is answered again; abort after commit is not allowed.
    assert await c.end_txn("tx", pid, epoch, True) == E.NONE
    assert await c.end_txn("tx", pid, epoch, False) == E.INVALID_TXN_STATE


async def test_abort_writes_abort_markers_and_drops_the_offsets(tmp_path: Path) -> None:
    offsets = RecordingOffsets()
    markers = RecordingMarkers(offsets)
    c = make_coordinator(tmp_path, markers=markers, offsets=offsets)
    init = await c.init_producer_id("tx", 10_000)
    pid, epoch = init.producer_id, init.producer_epoch
    await c.add_partitions("tx", pid, epoch, [("a", 0)])
    await c.add_offsets("tx", pid, epoch, "g")
    txn_offset_commit(c, markers, "tx", pid, epoch, "g", {("in", 0): (7, -1, "")})
    assert await c.end_txn("tx", pid, epoch, False) == E.NONE
    assert markers.markers == {("a", 0): [(pid, epoch, False)]}
    assert offsets.committed == {}


async def test_a_new_producer_instance_fences_the_old_one_and_aborts_its_transaction(
    tmp_path: Path,
) -> None:
    markers = RecordingMarkers()
    c = make_coordinator(tmp_path, markers=markers)
    old = await c.init_producer_id("tx", 10_000)
    await c.add_partitions("tx", old.producer_id, old.producer_epoch, [("a", 0)])
    new = await c.init_producer_id("tx", 10_000)
    assert new.producer_id == old.producer_id and new.producer_epoch == old.producer_epoch + 2
    # The open transaction was aborted under the fencing epoch (old + 1).
    assert markers.markers == {("a", 0): [(old.producer_id, old.producer_epoch + 1, False)]}
    assert await c.end_txn("tx", old.producer_id, old.producer_epoch, True) == E.PRODUCER_FENCED
    assert (
        await c.add_partitions("tx", old.producer_id, old.producer_epoch, [("a", 1)])
        == E.PRODUCER_FENCED
    )
    assert c.verify_partition(old.producer_id, old.producer_epoch, ("a", 0)) != E.NONE


async def test_requests_naming_another_producer_id_are_refused(tmp_path: Path) -> None:
    c = make_coordinator(tmp_path)
    init = await c.init_producer_id("tx", 10_000)
    wrong = init.producer_id + 1
    assert await c.add_partitions("tx", wrong, 0, [("a", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await c.end_txn("unknown", init.producer_id, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert (await c.init_producer_id("tx", 10_000, wrong, 0)).error == E.PRODUCER_FENCED


async def test_end_txn_without_a_transaction_is_an_invalid_state(tmp_path: Path) -> None:
    c = make_coordinator(tmp_path)
    init = await c.init_producer_id("tx", 10_000)
    assert await c.end_txn("tx", init.producer_id, 0, True) == E.INVALID_TXN_STATE


async def test_offsets_need_the_group_added_to_the_transaction(tmp_path: Path) -> None:
    markers = RecordingMarkers()
    c = make_coordinator(tmp_path, markers=markers)
    init = await c.init_producer_id("tx", 10_000)
    pid = init.producer_id
    await c.add_partitions("tx", pid, 0, [("a", 0)])
    assert txn_offset_commit(c, markers, "tx", pid, 0, "g", {("a", 0): (1, -1, "")}) == (
        E.INVALID_TXN_STATE
    )


async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(tmp_path: Path) -> None:
    markers, clock = RecordingMarkers(), Clock()
    c = make_coordinator(tmp_path, markers=markers, clock=clock)
    init = await c.init_producer_id("tx", 1000)
    await c.add_partitions("tx", init.producer_id, 0, [("a", 0)])
    clock.now += 1000
    assert await c.abort_timed_out() == 0
    clock.now += 1
    assert await c.abort_timed_out() == 1
    assert markers.markers == {("a", 0): [(init.producer_id, 1, False)]}
    assert c.transactions["tx"].state is TransactionState.COMPLETE_ABORT
    assert await c.end_txn("tx", init.producer_id, 0, True) == E.PRODUCER_FENCED
    again = await c.init_producer_id("tx", 1000)
    assert (again.error, again.producer_epoch) == (E.NONE, 2)


async def test_idle_transactional_ids_expire_and_open_ones_do_not(tmp_path: Path) -> None:
    clock = Clock()
    c = make_coordinator(tmp_path, clock=clock, id_expiration_ms=500, max_timeout_ms=10**9)
    idle = await c.init_producer_id("idle", 10**8)
    busy = await c.init_producer_id("busy", 10**8)
    await c.add_partitions("busy", busy.producer_id, 0, [("a", 0)])
    clock.now += 501
    assert c.expire_transactional_ids() == 1
    assert set(c.transactions) == {"busy"}
    assert c.transaction_of_producer(idle.producer_id) is None
    reloaded = make_coordinator(tmp_path)
    assert set(reloaded.transactions) == {"busy"}


async def test_the_state_survives_a_restart_and_a_prepared_commit_is_finished(
    tmp_path: Path,
) -> None:
    offsets = RecordingOffsets()
    markers = RecordingMarkers(offsets)
    c = make_coordinator(tmp_path, markers=markers, offsets=offsets)
    init = await c.init_producer_id("tx", 10_000)
    pid = init.producer_id
    await c.add_partitions("tx", pid, 0, [("a", 0)])
    await c.add_offsets("tx", pid, 0, "g")
    txn_offset_commit(c, markers, "tx", pid, 0, "g", {("in", 3): (9, 1, "m")})
    markers.fail = True
    assert await c.end_txn("tx", pid, 0, True) == E.COORDINATOR_NOT_AVAILABLE
    assert c.transactions["tx"].state is TransactionState.PREPARE_COMMIT
    c.journal.close()
    offsets2 = RecordingOffsets()
    markers2 = RecordingMarkers(offsets2)
    markers2.pending = markers.pending  # the group coordinator keeps them durably
    restarted = make_coordinator(tmp_path, markers=markers2, offsets=offsets2)
    assert state_of(restarted, "tx") is TransactionState.PREPARE_COMMIT
    await restarted.complete_pending()
    assert state_of(restarted, "tx") is TransactionState.COMPLETE_COMMIT
    assert markers2.markers == {("a", 0): [(pid, 0, True)]}
    assert offsets2.committed == {"g": {("in", 3): (9, 1, "m")}}
    assert await restarted.end_txn("tx", pid, 0, True) == E.NONE
    bumped = await restarted.init_producer_id("tx", 10_000)
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, 1)


async def test_a_torn_journal_record_is_cut_off(tmp_path: Path) -> None:
    c = make_coordinator(tmp_path)
    await c.init_producer_id("tx", 10_000)
    c.journal.close()
    with (tmp_path / JOURNAL_NAME).open("ab") as f:
        f.write(b"\x00\x00\x01\x00garbage")
    restarted = make_coordinator(tmp_path)
    assert restarted.transactions["tx"].producer_epoch == 0
    assert (await restarted.init_producer_id("tx", 10_000)).producer_epoch == 1
    restarted.journal.close()
    assert make_coordinator(tmp_path).transactions["tx"].producer_epoch == 1


async def test_the_journal_is_compacted_without_losing_concurrent_writes(tmp_path: Path) -> None:
    c = make_coordinator(tmp_path)
    c.journal.compact_after_bytes = 1
    for _ in range(20):
        await c.init_producer_id("tx", 10_000)
    assert c.journal.needs_compaction()
    data = c.journal.begin_compaction(list(c.transactions.values()))
    await c.init_producer_id("tx", 10_000)  # written while the compacted file is made
    c.journal.write_compacted(data)
    c.journal.finish_compaction()
    c.journal.close()
    size = (tmp_path / JOURNAL_NAME).stat().st_size
    assert size < 600
    assert make_coordinator(tmp_path).transactions["tx"].producer_epoch == 20
