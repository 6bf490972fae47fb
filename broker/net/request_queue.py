"""The order in which handlers take queued requests, sans-IO.

Kafka's request queue is one FIFO: under a flood of large Produce requests a
Metadata or Heartbeat waits behind every large request queued before it, and with
every handler busy on large ones it waits for a handler too (tens of milliseconds
on this broker, where handlers share one thread). Here requests are queued in two
lanes by size, and handlers take a small request before a large one, with two
bounds that keep the large lane moving and the small one fast:

- after `small_burst` small requests taken in a row while a large one could have
  been taken, the large one goes next, so small requests cannot starve it;
- at most `large_limit` large requests are in service at once (a quarter of the
  handlers, set by the request channel), so handlers are free for small requests,
  and a scheduler round (all handlers share one thread) holds few large requests.

Per-connection order is untouched: a connection has at most one request in flight
(its processor reads the next only after the response), so reordering between
lanes only ever reorders different connections.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")

SMALL_REQUEST_BYTES = 64 * 1024
"""A request of at most this many bytes (after the size prefix) is small."""
SMALL_BURST = 16
"""Small requests taken in a row, while a large one waits, before the large one goes."""


class RequestQueue(Generic[T]):
    """Bounded at `capacity` requests in all (`queued.max.requests`)."""

    __slots__ = (
        "_large",
        "_large_in_service",
        "_small",
        "_small_streak",
        "capacity",
        "large_limit",
        "small_burst",
        "small_bytes",
    )

    def __init__(
        self,
        capacity: int,
        *,
        small_bytes: int = SMALL_REQUEST_BYTES,
        small_burst: int = SMALL_BURST,
        large_limit: int = 1,
    ) -> None:
        if capacity < 1 or small_burst < 1 or large_limit < 1:
            raise ValueError("capacity, small_burst and large_limit must be at least 1")
        self.capacity = capacity
        self.small_bytes = small_bytes
        self.small_burst = small_burst
        self.large_limit = large_limit
        self._small: deque[T] = deque()
        self._large: deque[T] = deque()
        self._large_in_service = 0
        self._small_streak = 0

    def __len__(self) -> int:
        return len(self._small) + len(self._large)

    @property
    def is_full(self) -> bool:
        return len(self) >= self.capacity

    @property
    def large_in_service(self) -> int:
        return self._large_in_service

    def is_large(self, size: int) -> bool:
        return size > self.small_bytes

    def put(self, item: T, size: int) -> None:
        """Queue a request of `size` bytes; the caller waits while the queue is full."""
        if self.is_full:
            raise OverflowError("request queue is full")
        (self._large if self.is_large(size) else self._small).append(item)

    def take(self) -> T | None:
        """The request a free handler should take now, or None (nothing it may take)."""
        large_ready = bool(self._large) and self._large_in_service < self.large_limit
        if self._small and not (large_ready and self._small_streak >= self.small_burst):
            self._small_streak = self._small_streak + 1 if large_ready else 0
            return self._small.popleft()
        if large_ready:
            self._small_streak = 0
            self._large_in_service += 1
            return self._large.popleft()
        return None

    def done(self, size: int) -> None:
        """A request taken earlier is no longer in service."""
        if self.is_large(size):
            if self._large_in_service <= 0:
                raise ValueError("a large request was done that was not in service")
            self._large_in_service -= 1

    def take_all(self) -> list[T]:
        """Empty the queue (shutdown), small then large."""
        items = [*self._small, *self._large]
        self._small.clear()
        self._large.clear()
        return items


__all__ = ["SMALL_BURST", "SMALL_REQUEST_BYTES", "RequestQueue"]
