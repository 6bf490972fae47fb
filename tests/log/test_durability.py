"""Flush policy: fsync per flush.messages, and acknowledged data surviving SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.log.helpers import append_values, config, open_manager, read_all
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


async def test_flush_messages_one_fsyncs_before_append_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    async with open_manager(config(tmp_path)) as manager:
        every = (
            await manager.create_topic("every", 1, configs={"flush.messages": "1"})
        ).partitions[0]
        lazy = (await manager.create_topic("lazy", 1)).partitions[0]
        monkeypatch.setattr(os, "fsync", counting_fsync)
        await append_values(lazy, [b"a"])
        assert synced == []
        assert lazy.recovery_point == 0
        await append_values(every, [b"a"])
        log_fd = every.active._fd
        assert log_fd in synced
        assert every.recovery_point == every.log_end_offset == 1
        synced.clear()
        await append_values(every, [b"b"])
        assert log_fd in synced


async def test_flush_messages_counts_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_manager(config(tmp_path, log_flush_interval_messages="5")) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        await append_values(log, [b"1", b"2", b"3"])
        assert log.recovery_point == 0
        await append_values(log, [b"4", b"5"])
        assert log.recovery_point == 5


async def test_flush_ms_flushes_in_the_background(tmp_path: Path) -> None:
    from broker.log.log_manager import LogManager

    manager = LogManager(config(tmp_path))
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        log = (await manager.create_topic("t", 1, configs={"flush.ms": "20"})).partitions[0]
        await append_values(log, [b"x"])
        await wait_until(lambda: log.recovery_point >= 1)
        nursery.cancel_scope.cancel()


def test_acknowledged_batches_survive_sigkill(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.log.kill_writer", str(log_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acknowledged: list[int] = []
    try:
        assert child.stdout is not None
        while len(acknowledged) < 200:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else "child exited"
            acknowledged.append(int(line))
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert acknowledged == list(range(200))
    assert not (log_dir / ".kafka_cleanshutdown").exists()

    async def reopen() -> list[tuple[int, bytes | None]]:
        async with open_manager(config(tmp_path)) as manager:
            log = manager.partition("durable", 0)
            assert log is not None
            assert log.log_end_offset >= 200
            return await read_all(log)

    records = trio.run(reopen)
    assert records[:200] == [(i, b"record-%d" % i) for i in range(200)]
