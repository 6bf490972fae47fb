"""The delayed-close queue (KIP-306) on Trio's mock clock: every entry finishes at its
deadline (at most a tick after), never before, in deadline order, all by one task that
exists only while entries wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.net.delayed_close import TICK_S, DelayedCloseQueue

# (arrival offset after the previous one, delay), in seconds
ARRIVALS = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.001, 0.05, 0.1, 0.3]),
        st.sampled_from([0.0, 0.01, 0.1, 0.1, 0.25, 1.0]),
    ),
    min_size=1,
    max_size=30,
)


def run_on_mock_clock(main: Callable[[], Awaitable[None]]) -> None:
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=60, deadline=None)
@given(ARRIVALS)
def test_every_entry_finishes_at_its_deadline_in_order_with_one_task(
    arrivals: list[tuple[float, float]],
) -> None:
    finished: list[tuple[int, float]] = []
    deadlines: list[float] = []
    spawned: list[int] = []
    tasks_seen: set[int] = set()

    async def main() -> None:
        async with trio.open_nursery() as nursery:

            def spawn(run: Callable[[], Awaitable[None]]) -> None:
                spawned.append(len(queue))
                nursery.start_soon(run)

            queue = DelayedCloseQueue(spawn)

            def finish(index: int) -> Callable[[], None]:
                def done() -> None:
                    tasks_seen.add(id(trio.lowlevel.current_task()))
                    finished.append((index, trio.current_time()))

                return done

            for index, (gap, delay) in enumerate(arrivals):
                await trio.sleep(gap)
                deadline = trio.current_time() + delay
                deadlines.append(deadline)
                queue.add(deadline, finish(index))
        assert len(queue) == 0

    run_on_mock_clock(main)
    assert sorted(i for i, _ in finished) == list(range(len(arrivals)))
    for index, at in finished:
        assert at >= deadlines[index]
        assert at - deadlines[index] <= TICK_S + 1e-9
    order = [i for i, _ in finished]
    assert order == sorted(order, key=lambda i: (deadlines[i], i))
    # One task at a time: spawned only when the queue was empty (else woken).
    assert all(size == 1 for size in spawned)
    assert len(tasks_seen) <= len(spawned)


def test_an_earlier_deadline_added_later_wakes_the_timer() -> None:
    finished: list[str] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            queue = DelayedCloseQueue(lambda run: nursery.start_soon(run))
            queue.add(trio.current_time() + 10, lambda: finished.append("late"))
            await trio.sleep(1)
            queue.add(trio.current_time() + 0.5, lambda: finished.append("early"))
            await trio.sleep(0.6)
            assert finished == ["early"]
            assert len(queue) == 1

    run_on_mock_clock(main)
    assert finished == ["early", "late"]


def test_a_failing_callback_does_not_stop_the_others() -> None:
    finished: list[int] = []

    def broken() -> None:
        raise OSError("socket already gone")

    async def main() -> None:
        queue = DelayedCloseQueue()  # a system task, as in the broker
        now = trio.current_time()
        queue.add(now + 0.1, broken)
        queue.add(now + 0.1, lambda: finished.append(1))
        await trio.sleep(0.2)
        assert finished == [1]

    run_on_mock_clock(main)


def test_entries_still_waiting_when_the_run_ends_are_finished_then() -> None:
    finished: list[int] = []

    async def main() -> None:
        queue = DelayedCloseQueue()
        queue.add(trio.current_time() + 60, lambda: finished.append(1))
        await trio.sleep(1)
        assert finished == []

    run_on_mock_clock(main)
    assert finished == [1]


def test_a_flood_of_failures_is_closed_a_tick_at_a_time() -> None:
    finished_at: list[float] = []

    async def main() -> None:
        queue = DelayedCloseQueue()
        for _ in range(100):  # one failure a millisecond, each closed 100 ms later
            queue.add(trio.current_time() + 0.1, lambda: finished_at.append(trio.current_time()))
            await trio.sleep(0.001)
        await trio.sleep(0.2)

    run_on_mock_clock(main)
    assert len(finished_at) == 100
    assert len(set(finished_at)) <= 0.1 / TICK_S + 2  # wakes: one per tick, not per failure
