"""Start-up after clean and unclean shutdowns: torn tails, garbage, lost indexes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log.log_manager import CLEAN_SHUTDOWN_FILE
from broker.log.log_segment import LogSegment
from tests.log.helpers import append_values, config, crash, open_manager, read_all


async def _fill(tmp_path: Path, batches: int, **overrides: str) -> Path:
    async with open_manager(config(tmp_path, **overrides)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        for i in range(batches):
            await append_values(log, [b"v%d" % i, b"w%d" % i])
        return log.directory


# The helpers' records carry 2023 timestamps: without this, segment age rolls at once.
_NO_TIME_ROLL = {"log_roll_ms": str(10**15)}


def _last_log_file(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def _remove_clean_marker(tmp_path: Path) -> None:
    (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).unlink()


@pytest.mark.parametrize("cut", [1, 12, 30])
async def test_a_torn_tail_is_truncated_and_appends_continue_at_the_right_offset(
    tmp_path: Path, cut: int
) -> None:
    directory = await _fill(tmp_path, 10)
    path = _last_log_file(directory)
    size = path.stat().st_size
    os.truncate(path, size - cut)
    _remove_clean_marker(tmp_path)
    async with open_manager(config(tmp_path)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert log.log_end_offset == 18
        assert path.stat().st_size < size - cut or cut == 0
        assert [o for o, _ in await read_all(log)] == list(range(18))
        assert await append_values(log, [b"new"]) == (18, 18)
        assert (await read_all(log, 18)) == [(18, b"new")]


async def test_garbage_after_the_last_batch_is_removed(tmp_path: Path) -> None:
    directory = await _fill(tmp_path, 10)
    path = _last_log_file(directory)
    size = path.stat().st_size
    with path.open("ab") as f:
        f.write(os.urandom(5000))
    _remove_clean_marker(tmp_path)
    async with open_manager(config(tmp_path)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert path.stat().st_size == size
        assert log.log_end_offset == 20
        assert await append_values(log, [b"after"]) == (20, 20)
        assert (await read_all(log))[-1] == (20, b"after")


async def test_a_corrupt_batch_in_the_middle_truncates_from_there(tmp_path: Path) -> None:
    directory = await _fill(tmp_path, 10)
    path = _last_log_file(directory)
    data = bytearray(path.read_bytes())
    batch_size = len(data) // 10
    data[4 * batch_size + 70] ^= 0xFF  # a record byte of the fifth batch: CRC mismatch
    path.write_bytes(bytes(data))
    _remove_clean_marker(tmp_path)
    async with open_manager(config(tmp_path)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert log.log_end_offset == 8
        assert path.stat().st_size == 4 * batch_size


async def test_corruption_in_an_old_segment_keeps_the_valid_later_segments(
    tmp_path: Path,
) -> None:
    """Unlike Kafka's LogLoader, later segments (whole, validated files) are kept: they may
    hold acknowledged records appended after a restart. The corrupt range becomes a gap."""
    directory = await _fill(tmp_path, 30, log_segment_bytes="600")
    logs = sorted(directory.glob("*.log"))
    assert len(logs) >= 3
    second_base = int(logs[1].name.removesuffix(".log"))
    data = bytearray(logs[0].read_bytes())
    data[-5] ^= 0xFF  # in the last batch of the first segment
    logs[0].write_bytes(bytes(data))
    _remove_clean_marker(tmp_path)
    # Without a recovery point everything is recovered.
    (tmp_path / "logs" / "recovery-point-offset-checkpoint").unlink()
    async with open_manager(config(tmp_path, log_segment_bytes="600")) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert sorted(directory.glob("*.log")) == logs
        offsets = [o for o, _ in await read_all(log)]
        assert offsets == [o for o in range(60) if o < second_base - 2 or o >= second_base]
        assert await append_values(log, [b"x"]) == (60, 60)


async def test_appends_after_a_restart_survive_older_corruption_in_the_active_segment(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 14: corrupt the active segment after a clean shutdown, restart, append 100
    records, then start again rebuilding everything: not one appended record is lost."""
    directory = await _fill(tmp_path, 10, **_NO_TIME_ROLL)
    path = _last_log_file(directory)
    data = bytearray(path.read_bytes())
    batch_size = len(data) // 10
    data[4 * batch_size + 70] ^= 0xFF  # a record byte of the fifth batch: CRC mismatch
    path.write_bytes(bytes(data))
    async with open_manager(config(tmp_path, **_NO_TIME_ROLL)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert log.log_end_offset == 20
        for i in range(100):
            assert await append_values(log, [b"after-%d" % i]) == (20 + i, 20 + i)
    assert f"{path}: corrupt batch at position {4 * batch_size} (offset 8)" in caplog.text
    assert len(list(directory.glob("*.log"))) == 2, "new records went to a new segment"
    _remove_clean_marker(tmp_path)
    for index in directory.glob("*index"):
        index.unlink()
    (tmp_path / "logs" / "recovery-point-offset-checkpoint").unlink()
    async with open_manager(config(tmp_path, **_NO_TIME_ROLL)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        records = await read_all(log, 20)
        assert records == [(20 + i, b"after-%d" % i) for i in range(100)]
        assert log.log_end_offset == 120


async def test_a_clean_active_segment_is_not_rolled_at_start_up(tmp_path: Path) -> None:
    directory = await _fill(tmp_path, 10, **_NO_TIME_ROLL)
    async with open_manager(config(tmp_path, **_NO_TIME_ROLL)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert await append_values(log, [b"more"]) == (20, 20)
    assert len(list(directory.glob("*.log"))) == 1


async def test_missing_indexes_are_rebuilt_even_after_a_clean_shutdown(tmp_path: Path) -> None:
    overrides = {"log_segment_bytes": "2000", "log_index_interval_bytes": "100"}
    directory = await _fill(tmp_path, 40, **overrides)
    indexes = {p: p.read_bytes() for p in directory.glob("*.index")}
    time_indexes = {p: p.read_bytes() for p in directory.glob("*.timeindex")}
    assert any(indexes.values())
    for path in [*indexes, *time_indexes]:
        path.unlink()
    async with open_manager(config(tmp_path, **overrides)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert [o for o, _ in await read_all(log)] == list(range(80))
    for path, content in indexes.items():
        assert path.read_bytes() == content
    for path, content in time_indexes.items():
        assert path.read_bytes() == content


async def test_an_index_pointing_past_the_log_is_rebuilt(tmp_path: Path) -> None:
    overrides = {"log_index_interval_bytes": "100"}
    directory = await _fill(tmp_path, 20, **overrides)
    index = next(directory.glob("*.index"))
    good = index.read_bytes()
    index.write_bytes(good + (9999).to_bytes(4, "big") + (10**8).to_bytes(4, "big"))
    async with open_manager(config(tmp_path, **overrides)) as manager:
        log = manager.partition("t", 0)
        assert log is not None
        assert [o for o, _ in await read_all(log)] == list(range(40))
    assert index.read_bytes() == good


async def test_the_clean_shutdown_marker_skips_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _fill(tmp_path, 10)
    scans = []
    original = LogSegment.recover

    def counting(self: LogSegment, *args: object, **kwargs: object) -> int:
        scans.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", counting)
    async with open_manager(config(tmp_path)) as manager:
        log = manager.partition("t", 0)
        assert log is not None and log.log_end_offset == 20
        assert not (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
        await append_values(log, [b"more"])
        crash(manager)
    assert scans == []
    async with open_manager(config(tmp_path)) as manager:
        log = manager.partition("t", 0)
        assert log is not None and log.log_end_offset == 21
    # Only the segment holding the recovery point onwards (here: the active one).
    active_base = int(_last_log_file(tmp_path / "logs" / "t-0").name[:20])
    assert scans == [active_base]
