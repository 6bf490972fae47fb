"""The transaction coordinator's service writes its journal after each burst of changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.transaction.transaction_service import (
    JOURNAL_FLUSH_DELAY_S,
    TransactionCoordinatorService,
)
from tests.transaction.helpers import make_coordinator
from tests.waiting import wait_until

HOUR_MS = 3_600_000
QUIET_S = 3 * JOURNAL_FLUSH_DELAY_S


async def test_each_burst_of_changes_is_flushed_once_and_no_change_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator = make_coordinator(tmp_path)
    flushes: list[None] = []
    flush = coordinator.journal.flush

    def counted_flush() -> None:  # runs in a worker thread
        flushes.append(None)
        flush()

    monkeypatch.setattr(coordinator.journal, "flush", counted_flush)
    service = TransactionCoordinatorService(
        coordinator, abort_interval_ms=HOUR_MS, expiration_interval_ms=HOUR_MS
    )
    coordinator.on_change()  # before the service runs: still written once it does
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        await wait_until(lambda: len(flushes) == 1)
        await trio.sleep(QUIET_S)
        assert len(flushes) == 1  # nothing changed since: nothing written
        coordinator.on_change()
        coordinator.on_change()
        await wait_until(lambda: len(flushes) == 2)
        await trio.sleep(QUIET_S)
        assert len(flushes) == 2  # two changes at once: one write
        nursery.cancel_scope.cancel()
    coordinator.journal.close()
