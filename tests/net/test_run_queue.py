"""run_queue.runnable_tasks answers what trio.lowlevel.current_statistics() does for
tasks_runnable, without walking every socket waiting on I/O."""

from __future__ import annotations

import socket

import trio
import trio.testing

from broker.net import run_queue
from broker.net.run_queue import runnable_tasks


def _public() -> int:
    return trio.lowlevel.current_statistics().tasks_runnable


async def test_with_every_task_blocked_nothing_is_runnable() -> None:
    await trio.testing.wait_all_tasks_blocked()
    assert runnable_tasks() == _public() == 0


async def test_tasks_started_but_not_yet_run_are_counted() -> None:
    async with trio.open_nursery() as nursery:
        for _ in range(7):
            nursery.start_soon(trio.sleep, 0)
        assert runnable_tasks() == _public() == 7
    assert runnable_tasks() == _public()


async def test_tasks_waiting_on_sockets_are_not_counted() -> None:
    left, right = socket.socketpair()
    with left, right:
        async with trio.open_nursery() as nursery:
            for sock in (left, right):
                nursery.start_soon(trio.lowlevel.wait_readable, sock)
            await trio.testing.wait_all_tasks_blocked()
            assert runnable_tasks() == _public() == 0
            right.send(b"x")  # wakes the task waiting on `left` at the next I/O check
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()


def test_the_runner_is_read_rather_than_the_public_statistics() -> None:
    # The fast path is in use with the pinned Trio: were it the fallback, every accept
    # would walk every connection's registration again.
    assert run_queue.runnable_tasks is not run_queue._public
