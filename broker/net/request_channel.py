"""The request channel: a bounded queue of requests, a response queue per processor.

Kafka's RequestChannel maps onto Trio memory channels. The request queue is
bounded by `queued.max.requests`, so a processor that enqueues into a full
channel waits, and with it every connection that processor serves: that is
the back-pressure Kafka relies on.

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

from broker.net.request import (
    EndThrottlingResponse,
    Request,
    Response,
    StartThrottlingResponse,
)

log = logging.getLogger(__name__)


class RequestChannel:
    """Shared by the processors of one plane (data or control) and its handlers."""

    def __init__(self, queue_size: int, name: str = "data-plane") -> None:
        self.name = name
        self.queue_size = queue_size
        send, receive = trio.open_memory_channel[Request](queue_size)
        self._request_send = send
        self._request_receive = receive
        self._processors: dict[int, Callable[[Response], None]] = {}
        self._response_queue_sizes: dict[int, Callable[[], int]] = {}
        self._timers: trio.Nursery | None = None

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

    async def send_request(self, request: Request) -> None:
        """Enqueue a request; waits while the queue is full (back-pressure).

        The common case, a queue with room, does not yield to the scheduler:
        the caller waits for its response right after, and that wait yields.
        """
        try:
            self._request_send.send_nowait(request)
        except trio.WouldBlock:
            await self._request_send.send(request)

    # -- handlers ---------------------------------------------------------
    @property
    def requests(self) -> trio.MemoryReceiveChannel[Request]:
        return self._request_receive

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
        return self._request_send.statistics().current_buffer_used

    def response_queue_size(self, processor_id: int | None = None) -> int:
        if processor_id is not None:
            size = self._response_queue_sizes.get(processor_id)
            return 0 if size is None else size()
        return sum(size() for size in self._response_queue_sizes.values())

    def clear(self) -> int:
        """Drop queued requests that no handler took (shutdown); returns how many."""
        dropped = 0
        while True:
            try:
                request = self._request_receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return dropped
            request.release_memory()
            dropped += 1
