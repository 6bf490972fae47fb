"""The leader-epoch cache, its checkpoint file and OffsetsForLeaderEpoch's answer."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.error_codes import ErrorCode
from broker.replication.leader_epoch_cache import (
    UNDEFINED_EPOCH_END_OFFSET,
    EpochEndOffset,
    EpochEntry,
    LeaderEpochCache,
)
from broker.replication.leader_epoch_check import check_current_leader_epoch
from broker.replication.leader_epoch_checkpoint import (
    MalformedCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
    read_checkpoint,
    write_checkpoint,
)


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(e, o) for e, o in entries)


def test_the_end_of_an_epoch_is_where_the_next_one_starts() -> None:
    epochs = cache((0, 0), (2, 10), (5, 30))
    assert epochs.end_offset_for(5, log_end_offset=42) == EpochEndOffset(5, 42)
    assert epochs.end_offset_for(2, 42) == EpochEndOffset(2, 30)
    assert epochs.end_offset_for(0, 42) == EpochEndOffset(0, 10)
    # An epoch this replica never led in: the largest one below it, and its end.
    assert epochs.end_offset_for(3, 42) == EpochEndOffset(2, 30)
    assert epochs.end_offset_for(6, 42) == UNDEFINED_EPOCH_END_OFFSET
    assert epochs.end_offset_for(-1, 42) == UNDEFINED_EPOCH_END_OFFSET
    assert cache().end_offset_for(0, 42) == UNDEFINED_EPOCH_END_OFFSET


def test_an_epoch_older_than_any_kept_ends_where_the_oldest_kept_begins() -> None:
    assert cache((3, 100), (4, 150)).end_offset_for(1, 200) == EpochEndOffset(1, 100)


def test_a_newer_entry_replaces_the_entries_it_contradicts() -> None:
    epochs = cache((0, 0), (2, 10), (5, 30))
    assert epochs.assign(5, 35) is False  # the same epoch later: nothing new
    assert epochs.assign(4, 20) is True
    assert epochs.entries == (EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(4, 20))
    with pytest.raises(ValueError):
        epochs.assign(-1, 0)


def test_truncation_from_either_end_keeps_the_epochs_of_the_remaining_log() -> None:
    epochs = cache((0, 0), (2, 10), (5, 30))
    assert epochs.truncate_from_end(30) is True
    assert list(epochs.entries) == [EpochEntry(0, 0), EpochEntry(2, 10)]
    assert epochs.truncate_from_start(15) is True
    assert list(epochs.entries) == [EpochEntry(2, 15)]
    assert epochs.truncate_from_start(5) is False


def test_the_checkpoint_is_kafkas_text_format() -> None:
    data = encode_checkpoint((EpochEntry(0, 0), EpochEntry(3, 1200)))
    assert data == b"0\n2\n0 0\n3 1200\n"
    assert decode_checkpoint(data) == [EpochEntry(0, 0), EpochEntry(3, 1200)]
    assert decode_checkpoint(b"0\n0\n") == []


def test_the_checkpoint_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    assert read_checkpoint(path) == []
    write_checkpoint(path, (EpochEntry(0, 0),))
    write_checkpoint(path, (EpochEntry(0, 0), EpochEntry(1, 7)))
    assert read_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(1, 7)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leader-epoch-checkpoint"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not a leader-epoch checkpoint"),
        (b"1\n0\n", "unknown version 1"),
        (b"0\n2\n0 0\n", "2 entries announced, 1 found"),
        (b"0\n1\n0 x\n", "not a leader-epoch checkpoint"),
        (b"0\n1\n-1 0\n", "negative epoch or offset"),
    ],
)
def test_a_damaged_checkpoint_is_refused_naming_the_file(data: bytes, reason: str) -> None:
    with pytest.raises(MalformedCheckpoint, match=f"^f: {reason}"):
        decode_checkpoint(data, "f")


@given(st.binary(max_size=60))
def test_any_bytes_decode_or_are_refused_as_malformed(data: bytes) -> None:
    try:
        entries = decode_checkpoint(data)
    except MalformedCheckpoint:
        return
    assert encode_checkpoint(tuple(entries)) is not None


operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 100)),
        st.tuples(st.just("end"), st.integers(0, 100), st.just(0)),
        st.tuples(st.just("start"), st.integers(0, 100), st.just(0)),
    ),
    max_size=25,
)


@given(operations, st.integers(-1, 14), st.integers(0, 20))
def test_the_cache_stays_monotonic_and_answers_like_a_scan(
    ops: list[tuple[str, int, int]], requested: int, beyond: int
) -> None:
    epochs = LeaderEpochCache()
    for op, a, b in ops:
        if op == "assign":
            epochs.assign(a, b)
        elif op == "end":
            epochs.truncate_from_end(a)
        else:
            epochs.truncate_from_start(a)
    entries = epochs.entries
    assert all(
        x.epoch < y.epoch and x.start_offset < y.start_offset
        for x, y in itertools.pairwise(entries)
    )
    log_end = (entries[-1].start_offset if entries else 0) + beyond
    answer = epochs.end_offset_for(requested, log_end)
    # The model: the epoch is the largest known one at most `requested`; it ends where
    # the first later epoch starts, or at the log end when it is the latest.
    if requested < 0 or not entries or requested > entries[-1].epoch:
        assert answer == UNDEFINED_EPOCH_END_OFFSET
        return
    later = [e for e in entries if e.epoch > requested]
    floor = [e for e in entries if e.epoch <= requested]
    expected_epoch = floor[-1].epoch if floor else requested
    expected_end = later[0].start_offset if later else log_end
    assert answer == EpochEndOffset(expected_epoch, expected_end)
    assert decode_checkpoint(encode_checkpoint(entries)) == list(entries)


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, ErrorCode.NONE),
        (4, ErrorCode.NONE),
        (3, ErrorCode.FENCED_LEADER_EPOCH),
        (5, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_requests_name_the_current_leader_epoch(requested: int, expected: ErrorCode) -> None:
    assert check_current_leader_epoch(requested, local_epoch=4) is expected
