"""The acceptor lets a bounded number of scheduler rounds go by while other tasks are
runnable, so new connections come after established work without being starved."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.net import acceptor
from broker.net.acceptor import DEFERRED_ROUNDS, defer_to_runnable_tasks


async def test_with_nothing_else_to_run_the_acceptor_does_not_wait() -> None:
    await trio.testing.wait_all_tasks_blocked()
    before = trio.lowlevel.current_statistics().tasks_runnable
    assert before == 0
    with trio.testing.assert_no_checkpoints():
        await defer_to_runnable_tasks()


async def test_while_others_are_busy_the_acceptor_waits_a_bounded_number_of_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Trio counts as runnable the tasks queued for the next round; a busy broker always
    # has some: faked here, since a test cannot order a round's tasks.
    monkeypatch.setattr(acceptor, "runnable_tasks", lambda: 5)
    checkpoints = 0

    async def counting_checkpoint() -> None:
        nonlocal checkpoints
        checkpoints += 1
        await real_checkpoint()

    real_checkpoint = trio.lowlevel.checkpoint
    monkeypatch.setattr(trio.lowlevel, "checkpoint", counting_checkpoint)
    await defer_to_runnable_tasks()
    assert checkpoints == DEFERRED_ROUNDS
