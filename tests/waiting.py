"""Waiting, under a deadline, for state that no event announces."""

from collections.abc import Callable

import trio


async def wait_until(
    predicate: Callable[[], object], timeout_s: float = 5.0, interval_s: float = 0.01
) -> None:
    """Poll `predicate` until it holds; trio.TooSlowError after `timeout_s`.

    For what a test cannot be told about: a counter or table a broker task updates, another
    process's files, a store that polls. Everything with a trio.Event should wait on it."""
    with trio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 - polling is the point: there is no event
            await trio.sleep(interval_s)
