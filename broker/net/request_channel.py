"""The request channel: a bounded queue of requests, a response queue per processor.

The request queue is bounded by `queued.max.requests`, so a processor that
enqueues into a full channel waits, and with it every connection that processor
serves: that is the back-pressure Kafka relies on. Unlike Kafka's FIFO, handlers
take small requests before large ones (see request_queue for the policy and its
bounds), so that a flood of large Produce requests does not hold up a Metadata.

Responses go back through the owning processor: the channel hands each one
to the processor's `deliver`, which queues it on the connection it belongs
to (the processor's response queue is the set of its connections' queues).
Kafka needs one queue per processor because one selector thread serves all
its connections; with a Trio task per connection, routing at once saves a
task switch per request. A response for a processor that is gone is dropped,
as Kafka drops it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.net.bulk_turns import BulkTurns
from broker.net.request import (
    EndThrottlingResponse,
    Request,
    Response,
    StartThrottlingResponse,
)
from broker.net.request_queue import RequestQueue

log = logging.getLogger(__name__)


class RequestChannel:
    """Shared by the processors of one plane (data or control) and its handlers."""

    def __init__(self, queue_size: int, name: str = "data-plane") -> None:
        self.name = name
        self.queue_size = queue_size
        self._queue = RequestQueue[Request](queue_size)
        self._senders = trio.lowlevel.ParkingLot()  # processors waiting for room
        self._takers = trio.lowlevel.ParkingLot()  # handlers waiting for a request
        self._processors: dict[int, Callable[[Response], None]] = {}
        self._response_queue_sizes: dict[int, Callable[[], int]] = {}
        self._timers: trio.Nursery | None = None
        # Large frames' reads and large requests' handling take turns while the loop is
        # idle (bulk_turns.py): the processors and handlers of this plane share them.
        self.bulk_turns = BulkTurns()

    # -- processors -------------------------------------------------------
    def add_processor(
        self,
        processor_id: int,
        deliver: Callable[[Response], None],
        queued_responses: Callable[[], int],
    ) -> None:
        """Register a processor: how to hand it a response, and how many it has queued."""
        self._processors[processor_id] = deliver
        self._response_queue_sizes[processor_id] = queued_responses

    def remove_processor(self, processor_id: int) -> None:
        self._processors.pop(processor_id, None)
        self._response_queue_sizes.pop(processor_id, None)

    def send_request_nowait(self, request: Request) -> bool:
        """Enqueue a request if the queue has room (the common case, without a
        coroutine: the caller waits for its response right after, and that wait
        yields); False when it is full."""
        if self._queue.is_full:
            return False
        self._queue.put(request, request.size_bytes)
        self._takers.unpark()
        return True

    async def send_request(self, request: Request) -> None:
        """Enqueue a request; waits while the queue is full (back-pressure)."""
        while not self.send_request_nowait(request):
            await self._senders.park()

    # -- handlers ---------------------------------------------------------
    def set_handler_count(self, count: int) -> None:
        """Large requests may occupy a quarter of the handlers (see request_queue)."""
        self._queue.large_limit = max(1, count // 4)
        self._takers.unpark()

    def receive_request_nowait(self) -> Request:
        """The request a free handler takes now; raises trio.WouldBlock if none."""
        request = self._queue.take()
        if request is None:
            raise trio.WouldBlock
        self._senders.unpark()
        return request

    async def receive_request(self) -> Request:
        """Wait for the next request a handler may take (always a checkpoint)."""
        await trio.lowlevel.checkpoint()
        while True:
            try:
                return self.receive_request_nowait()
            except trio.WouldBlock:
                await self._takers.park()

    def request_done(self, request: Request) -> None:
        """A handler is done with `request` (a large one frees its place in service)."""
        if self._queue.is_large(request.size_bytes):
            self._queue.done(request.size_bytes)
            self._takers.unpark()

    def send_response(self, response: Response) -> None:
        """Route a response to the processor that owns the request's connection."""
        deliver = self._processors.get(response.request.context.processor_id)
        if deliver is None:
            log.debug(
                "dropping response for removed processor %d", response.request.context.processor_id
            )
            return
        deliver(response)

    def start_throttling(self, request: Request, throttle_ms: int) -> None:
        """Mute the channel for `throttle_ms` after its response (KIP-219).

        StartThrottling is enqueued before the response itself; the timer that
        enqueues EndThrottling runs in the channel's own nursery, like Kafka's
        throttled-channel reaper.
        """
        if throttle_ms <= 0 or self._timers is None:
            return
        request.throttle_ms = throttle_ms
        self.send_response(StartThrottlingResponse(request))
        self._timers.start_soon(self._end_throttling_after, request, throttle_ms)

    async def _end_throttling_after(self, request: Request, throttle_ms: int) -> None:
        await trio.sleep(throttle_ms / 1000)
        self.send_response(EndThrottlingResponse(request))

    async def run_timers(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the throttle timers until cancelled."""
        async with trio.open_nursery() as nursery:
            self._timers = nursery
            task_status.started()
            await trio.sleep_forever()

    # -- metrics ----------------------------------------------------------
    def request_queue_size(self) -> int:
        return len(self._queue)

    def response_queue_size(self, processor_id: int | None = None) -> int:
        if processor_id is not None:
            size = self._response_queue_sizes.get(processor_id)
            return 0 if size is None else size()
        return sum(size() for size in self._response_queue_sizes.values())

    def clear(self) -> int:
        """Drop queued requests that no handler took (shutdown); returns how many."""
        dropped = self._queue.take_all()
        for request in dropped:
            request.release_memory()
        self._senders.unpark_all()
        return len(dropped)
