"""Bulk turns (issue 22 item 1): a large frame's step waits until nothing else is runnable,
one turn at a time, and never longer than the turn's bound, while small requests come;
on a quiet loop (none for QUIET_S) a turn is given at once. Without a network."""

from __future__ import annotations

import trio
import trio.testing

from broker.net.bulk_turns import BulkTurns

BUSY_STEPS = 20


def _turns(max_wait_s: float) -> BulkTurns:
    """Turns with a small request just seen (the request channel counts them)."""
    turns = BulkTurns(max_wait_s=max_wait_s)
    turns.small_requests += 1
    return turns


async def _busy(trace: list[str], steps: int = BUSY_STEPS) -> None:
    """Small work: a task that stays runnable for `steps` scheduler rounds."""
    for _ in range(steps):
        trace.append("small")
        await trio.lowlevel.checkpoint()


async def test_a_turn_starts_only_once_every_other_task_is_blocked() -> None:
    turns = _turns(max_wait_s=60)
    trace: list[str] = []

    async def bulk() -> None:
        async with turns:
            trace.append("bulk")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_busy, trace)
        nursery.start_soon(bulk)
    assert trace == ["small"] * BUSY_STEPS + ["bulk"]
    assert (turns.taken, turns.forced) == (1, 0)


async def test_turns_go_one_at_a_time_in_arrival_order() -> None:
    turns = _turns(max_wait_s=60)
    trace: list[str] = []

    async def bulk(name: str) -> None:
        async with turns:
            trace.append(f"{name} in")
            await trio.lowlevel.checkpoint()  # another task may run: not another turn
            trace.append(f"{name} out")

    async with trio.open_nursery() as nursery:
        for name in "abc":
            nursery.start_soon(bulk, name)
            await trio.testing.wait_all_tasks_blocked()
    assert trace == ["a in", "a out", "b in", "b out", "c in", "c out"]


async def test_a_loop_that_never_idles_delays_a_turn_by_at_most_its_bound(
    mock_clock: trio.testing.MockClock,
) -> None:
    turns = _turns(max_wait_s=0.005)
    trace: list[str] = []

    async def busy_with_time() -> None:
        # Always runnable, 1 ms of (mock) time a round, until the bulk step has run.
        for _ in range(1000):
            if "bulk" in trace:
                return
            trace.append("small")
            mock_clock.jump(0.001)
            await trio.lowlevel.checkpoint()

    async def bulk() -> None:
        await turns.wait()
        trace.append("bulk")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(busy_with_time)
        nursery.start_soon(bulk)
    assert "bulk" in trace
    assert 5 <= trace.index("bulk") <= 8
    assert (turns.taken, turns.forced) == (1, 1)


async def test_on_a_quiet_loop_a_turn_is_given_at_once_and_a_small_request_ends_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    turns = BulkTurns(max_wait_s=60, quiet_s=0.25)
    trace: list[str] = []

    async def bulk() -> None:
        assert await turns.wait()  # quiet: no small request yet
        trace.append("bulk")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_busy, trace)
        nursery.start_soon(bulk)
    assert trace.index("bulk") < BUSY_STEPS  # did not wait for the busy task to end
    assert (turns.taken, turns.quiet_taken) == (1, 1)

    turns.small_requests += 1  # a small request: turns wait for idleness again
    trace.clear()

    async def bulk_after_small() -> None:
        assert not await turns.wait()
        trace.append("bulk")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_busy, trace)
        nursery.start_soon(bulk_after_small)
    assert trace == ["small"] * BUSY_STEPS + ["bulk"]

    mock_clock.jump(0.24)  # not yet a quiet spell
    assert not turns.quiet()
    mock_clock.jump(0.02)
    assert turns.quiet()
    assert await turns.wait()
    assert (turns.taken, turns.quiet_taken) == (3, 2)


def test_turns_wait_with_trios_own_wait_all_tasks_blocked() -> None:
    """bulk_turns takes it from trio's core rather than import trio.testing (and pytest)."""
    import trio.testing
    from trio._core._generated_run import wait_all_tasks_blocked

    assert wait_all_tasks_blocked is trio.testing.wait_all_tasks_blocked


def test_a_broker_process_does_not_import_pytest() -> None:
    import subprocess
    import sys

    code = "import sys, broker.__main__, broker.server; print('pytest' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"
