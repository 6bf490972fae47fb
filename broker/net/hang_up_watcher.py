"""Connections that wait without reading, watched for their peer hanging up.

A connection is not read while its request waits for an answer (one request in
flight, as in Kafka) or for pool memory, so a client that closed its end went
unnoticed until that wait ended: a long-poll Fetch may ask to wait for weeks, and
under a flood of such requests (or of frames waiting for the pool) the broker kept
hundreds of sockets in CLOSE_WAIT until it stopped (issue 22, item 5). Only waits
that may be long are watched (an answer deferred by its handler, a frame the pool
makes wait), in one epoll set per processor waited on by one task, like the
first-bytes waiter: a request answered at once costs nothing.
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Callable
from typing import Generic, TypeVar

import trio

T = TypeVar("T")

AVAILABLE = hasattr(select, "epoll") and hasattr(select, "EPOLLRDHUP")
"""Linux: elsewhere waits are not watched (a closed peer is noticed when they end)."""

BATCH = 64
"""Hang-ups handled per turn at most; the rest come in the next."""


class HangUpWatcher(Generic[T]):
    """Sockets (by file descriptor) whose peer may hang up while they wait."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._watched: dict[int, T] = {}
        self._added = trio.Event()

    def __len__(self) -> int:
        return len(self._watched)

    def watch(self, fd: int, item: T) -> None:
        """Report `item` once `fd`'s peer stops sending (EPOLLRDHUP) or resets."""
        if fd < 0 or fd in self._watched:
            return
        self._epoll.register(fd, select.EPOLLRDHUP)
        self._watched[fd] = item
        self._added.set()

    def unwatch(self, fd: int) -> None:
        """Stop watching (the wait is over, or the socket is about to close)."""
        if self._watched.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)

    async def run(self, hung_up: Callable[[T, bool], None]) -> None:
        """Call `hung_up(item, reset)` once per hang-up (`reset`: the connection is gone
        both ways, EPOLLHUP/EPOLLERR), the socket then unwatched; until cancelled."""
        try:
            while True:
                if not self._watched:
                    self._added = trio.Event()
                    await self._added.wait()
                    continue
                await trio.lowlevel.wait_readable(self._epoll.fileno())
                for fd, events in self._epoll.poll(0, BATCH):
                    item = self._watched.get(fd)
                    if item is not None:
                        self.unwatch(fd)
                        hung_up(item, bool(events & (select.EPOLLHUP | select.EPOLLERR)))
        finally:
            trio.lowlevel.notify_closing(self._epoll.fileno())
            self._epoll.close()


__all__ = ["AVAILABLE", "HangUpWatcher"]
