"""New connections that have not sent a whole first frame yet, waited on by one task.

A processor reads a new connection's first bytes before registering it (first_read),
but a client's first frame often arrives a moment after the connection is accepted,
or in two parts (the frame, then the end of stream). Registering such a connection
right away would make every connection of a flood of bad frames pay for a task,
a stream and the event loop's registration; waiting for each with a task of its own
would cost almost as much. Instead the processor parks them here: one epoll set of
their sockets, itself waited on by one task, which hands each back to the processor
when it has bytes to read (or has hung up), or when its grace period has passed.
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Callable
from typing import Generic, TypeVar

import trio

T = TypeVar("T")

FIRST_BYTES_GRACE_S = 0.2
"""How long a new connection may wait for its first bytes before it is registered
anyway (then served like any connection, under connections.max.idle.ms)."""

BATCH = 20
"""Connections handed back per turn at most, as Kafka's processor registers at most 20
new connections per poll: the rest wait for the next round, after established work."""

AVAILABLE = hasattr(select, "epoll")
"""Linux: elsewhere new connections are registered at once."""


class FirstBytesWaiter(Generic[T]):
    """Sockets (by file descriptor) waiting for their first bytes, each with its item."""

    def __init__(self, grace_s: float = FIRST_BYTES_GRACE_S) -> None:
        self._grace_s = grace_s
        self._epoll = select.epoll()
        # Insertion order is deadline order: the grace period is the same for all.
        self._waiting: dict[int, tuple[T, float]] = {}
        self._added = trio.Event()

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, fd: int, item: T) -> None:
        """Wait for `fd` to be readable; `item` is what `run` hands back."""
        self._epoll.register(fd, select.EPOLLIN | select.EPOLLRDHUP)
        self._waiting[fd] = (item, trio.current_time() + self._grace_s)
        self._added.set()

    def take_all(self) -> list[T]:
        """Stop waiting for every socket (shutdown); returns their items."""
        items = [self._take(fd) for fd in list(self._waiting)]
        return items

    async def run(self, ready: Callable[[T], None]) -> None:
        """Hand each item to `ready` once its socket is readable or its grace is over;
        until cancelled. The epoll set is closed on exit (items left: see take_all)."""
        try:
            while True:
                if not self._waiting:
                    self._added = trio.Event()
                    await self._added.wait()
                    continue
                _, deadline = next(iter(self._waiting.values()))
                with trio.move_on_at(deadline):
                    await trio.lowlevel.wait_readable(self._epoll.fileno())
                for fd, _ in self._epoll.poll(0, BATCH):
                    if fd in self._waiting:
                        ready(self._take(fd))
                now = trio.current_time()
                for fd, (_, deadline) in list(self._waiting.items()):
                    if deadline > now:
                        break
                    ready(self._take(fd))
        finally:
            trio.lowlevel.notify_closing(self._epoll.fileno())
            self._epoll.close()

    def _take(self, fd: int) -> T:
        item, _ = self._waiting.pop(fd)
        with contextlib.suppress(OSError, ValueError):  # already closed
            self._epoll.unregister(fd)
        return item


__all__ = ["AVAILABLE", "FIRST_BYTES_GRACE_S", "FirstBytesWaiter"]
