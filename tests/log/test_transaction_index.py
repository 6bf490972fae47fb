"""The `.txnindex` file: Kafka's 34-byte entries, a torn tail, truncation, lookups."""

from __future__ import annotations

from pathlib import Path

from broker.log.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex


def test_entries_are_kafkas_34_byte_records_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    index.open()
    assert not path.exists()  # created with the first entry
    entries = [AbortedTxn(7, 0, 5, 3), AbortedTxn(8, 2, 9, 6)]
    for entry in entries:
        index.append(entry)
    index.close()
    data = path.read_bytes()
    assert len(data) == 2 * ENTRY_SIZE
    assert data[:2] == b"\x00\x00" and int.from_bytes(data[2:10], "big") == 7
    reloaded = TransactionIndex(path)
    reloaded.open()
    assert reloaded.entries == entries


def test_a_torn_entry_is_cut_off_at_load(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    index = TransactionIndex(path)
    index.open()
    index.append(AbortedTxn(1, 0, 1, 2))
    index.close()
    with path.open("ab") as f:
        f.write(AbortedTxn(2, 3, 4, 5).to_bytes()[:20])
    reloaded = TransactionIndex(path)
    reloaded.open()
    assert reloaded.entries == [AbortedTxn(1, 0, 1, 2)]
    assert path.stat().st_size == ENTRY_SIZE


def test_truncation_drops_markers_at_or_after_the_cut_and_collect_finds_overlaps(
    tmp_path: Path,
) -> None:
    index = TransactionIndex(tmp_path / "y.txnindex")
    index.open()
    for entry in (AbortedTxn(1, 0, 4, 5), AbortedTxn(2, 3, 10, 11), AbortedTxn(3, 12, 20, 21)):
        index.append(entry)
    assert [e.producer_id for e in index.collect(5, 13)] == [2, 3]
    assert [e.producer_id for e in index.collect(0, 3)] == [1]
    index.truncate_to(10)
    assert [e.producer_id for e in index.entries] == [1]
    index.close()
    reloaded = TransactionIndex(tmp_path / "y.txnindex")
    reloaded.open()
    assert reloaded.entries == [AbortedTxn(1, 0, 4, 5)]
    reloaded.truncate_to(0)
    assert not (tmp_path / "y.txnindex").exists()
