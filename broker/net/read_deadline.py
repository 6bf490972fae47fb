"""The deadline for receiving a request whole (`socket.request.read.timeout.ms`), sans-IO.

Kafka's only clock on a connection is `connections.max.idle.ms`, and every byte
received resets it, so a client trickling one byte a second of a large frame
holds a connection (and the frame's memory) for ever. A frame gets one
deadline instead, set when its first byte arrives: no per-byte timers, and
nothing to do per read but a comparison. The processor checks deadlines lazily,
as it does idle expiry: it sleeps until the earliest one, and any deadline set
later lies beyond that wake-up (now + timeout). Waiting for memory-pool bytes
is the broker's doing, not the client's, so the clock stops while a frame
waits for admission and starts afresh once it is admitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


class ReadDeadline:
    """One connection's deadline for the frame in progress; None when no frame is."""

    __slots__ = ("expires_at",)

    def __init__(self) -> None:
        self.expires_at: float | None = None

    def arm(self, now: float, timeout_s: float) -> None:
        """A frame is in progress: start its clock unless it is already running."""
        if self.expires_at is None and timeout_s > 0:
            self.expires_at = now + timeout_s

    def disarm(self) -> None:
        """The frame is complete, or waits for the memory pool."""
        self.expires_at = None

    def is_past(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def overdue(
    deadlines: Iterable[tuple[T, ReadDeadline]], now: float, timeout_s: float
) -> tuple[list[T], float]:
    """The owners whose frame is overdue, and when to look again (at the latest
    `now + timeout_s`, which no deadline armed after `now` can precede)."""
    late: list[T] = []
    next_check = now + timeout_s
    for owner, deadline in deadlines:
        expires = deadline.expires_at
        if expires is None:
            continue
        if expires <= now:
            late.append(owner)
        elif expires < next_check:
            next_check = expires
    return late, next_check
