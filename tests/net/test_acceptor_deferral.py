"""The acceptor lets a bounded number of scheduler rounds go by while other tasks are
runnable, so new connections come after established work without being starved."""

from __future__ import annotations

import trio
import trio.testing

from broker.net.acceptor import DEFERRED_ROUNDS, defer_to_runnable_tasks


async def test_with_nothing_else_to_run_the_acceptor_does_not_wait() -> None:
    await trio.testing.wait_all_tasks_blocked()
    before = trio.lowlevel.current_statistics().tasks_runnable
    assert before == 0
    with trio.testing.assert_no_checkpoints():
        await defer_to_runnable_tasks()


async def test_while_others_are_busy_the_acceptor_waits_a_bounded_number_of_rounds() -> None:
    rounds = 0
    stop = False

    async def busy() -> None:
        nonlocal rounds
        while not stop:
            rounds += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(busy)
        await trio.lowlevel.checkpoint()  # the busy task is running from now on
        start = rounds
        await defer_to_runnable_tasks()
        waited = rounds - start
        stop = True
    assert 1 <= waited <= DEFERRED_ROUNDS + 1
