"""acks=all produces waiting for the ISR (Kafka's DelayedProduce in the produce purgatory).

A produce with acks=all is appended at once, then answered only when every member of
the ISR holds its last record (the partition's high watermark reached it), or when
its request times out (REQUEST_TIMED_OUT: the records are written but not yet as
durably as asked), or when leadership moved (NOT_LEADER_OR_FOLLOWER). An ISR that
shrank below min.insync.replicas meanwhile answers NOT_ENOUGH_REPLICAS_AFTER_APPEND.

No polling: waiters sleep on one trio.Event per partition, replaced each time the
leader's state changes in a way that can complete them (a follower fetch advanced the
high watermark, an ISR change was recorded, leadership was lost), as Kafka's
checkAndComplete is called from exactly those places.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from broker.protocol.error_codes import ErrorCode
from broker.replication.partition_leader_state import AcksAllStatus


class DelayedProduce:
    def __init__(self, status: Callable[[int], AcksAllStatus]) -> None:
        """`status` is PartitionLeaderState.acks_all_status."""
        self._status = status
        self._changed = trio.Event()
        self._leadership_lost = False
        self.waiting = 0

    def check_and_complete(self) -> None:
        """Something that can complete a waiter changed: every waiter checks again."""
        event, self._changed = self._changed, trio.Event()
        event.set()

    def leadership_lost(self) -> None:
        self._leadership_lost = True
        self.check_and_complete()

    async def wait(self, required_offset: int, timeout_s: float) -> ErrorCode:
        """The produce's answer; `required_offset` is one past its last record."""
        deadline = trio.current_time() + timeout_s
        self.waiting += 1
        try:
            while True:
                if self._leadership_lost:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER
                status = self._status(required_offset)
                if status.done:
                    return status.error
                if trio.current_time() >= deadline:
                    return ErrorCode.REQUEST_TIMED_OUT
                changed = self._changed
                with trio.move_on_at(deadline):
                    await changed.wait()
        finally:
            self.waiting -= 1
