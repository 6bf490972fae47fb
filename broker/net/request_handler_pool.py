"""Request handler pool: M tasks taking requests from the channel to the API layer.

All handlers share one channel, so consecutive requests of a connection may
run on different handlers; ordering comes from the processor's one-in-flight
rule. The pool can grow and shrink while running (`num.io.threads`): a
removed handler finishes the request it holds, and is interrupted only while
it waits for the next one.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import trio

from broker.metrics import WindowedShare
from broker.net.request import Request
from broker.net.request_channel import RequestChannel
from broker.net.request_queue import SMALL_REQUEST_BYTES

log = logging.getLogger(__name__)

_MAX_WITHOUT_YIELD = 16


class ApiLayer(Protocol):
    async def handle(self, request: Request, channel: RequestChannel) -> None: ...


class _Handler:
    __slots__ = ("id", "scope", "stopped", "wait_started_ns", "waiting")

    def __init__(self, handler_id: int) -> None:
        self.id = handler_id
        self.stopped = False
        self.waiting = False
        self.wait_started_ns = 0
        self.scope = trio.CancelScope()


class RequestHandlerPool:
    """Runs the handlers in its own nursery, for one request channel."""

    def __init__(self, channel: RequestChannel, apis: ApiLayer, size: int) -> None:
        self._channel = channel
        self._apis = apis
        self._initial_size = size
        self._handlers: list[_Handler] = []
        self._nursery: trio.Nursery | None = None
        self._idle_ns = 0  # cumulative, of finished waits; open waits are added when read
        self._idle_share = WindowedShare()

    @property
    def size(self) -> int:
        return len(self._handlers)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.resize(self._initial_size)
            task_status.started()
            await trio.sleep_forever()

    def resize(self, new_size: int) -> None:
        """Grow or shrink to `new_size` handlers (validated by the config layer)."""
        if self._nursery is None:
            raise RuntimeError("handler pool is not running")
        while len(self._handlers) < new_size:
            handler = _Handler(len(self._handlers))
            self._handlers.append(handler)
            self._nursery.start_soon(
                self._run_handler, handler, name=f"request-handler-{handler.id}"
            )
        while len(self._handlers) > new_size:
            handler = self._handlers.pop()
            handler.stopped = True
            if handler.waiting:
                # Only a waiting handler is interrupted; a busy one finishes its request.
                handler.scope.cancel()
        self._channel.set_handler_count(new_size)

    async def _run_handler(self, handler: _Handler) -> None:
        channel = self._channel
        without_yield = 0
        with handler.scope:
            while not handler.stopped:
                waited = time.perf_counter_ns()
                handler.wait_started_ns = waited
                handler.waiting = True
                try:
                    # Take a queued request without a trip through the scheduler, but
                    # yield every so often so a busy handler cannot starve the network.
                    if without_yield < _MAX_WITHOUT_YIELD:
                        try:
                            request = channel.receive_request_nowait()
                            without_yield += 1
                        except trio.WouldBlock:
                            request = await channel.receive_request()
                            without_yield = 0
                    else:
                        request = await channel.receive_request()
                        without_yield = 0
                finally:
                    handler.waiting = False
                if request.size_bytes > SMALL_REQUEST_BYTES:
                    # Its first step (checks, validation) waits for the loop to be idle;
                    # on a quiet loop its batches are written there too (no thread hop).
                    # Its step has only begun (small requests at most before it).
                    request.bulk_on_loop = await channel.bulk_turns.wait(yielded=True)
                now = time.perf_counter_ns()
                self._idle_ns += now - waited
                request.dequeue_ns = now
                try:
                    await self._apis.handle(request, channel)
                except Exception:
                    # The API layer answers its own errors; anything reaching here is a bug
                    # in it, and must not take the handler down with it.
                    log.exception("unexpected error handling request %s", request.header)
                finally:
                    channel.request_done(request)
                if request.size_bytes > SMALL_REQUEST_BYTES:
                    # A large request is work enough for one turn: the next one waits
                    # for the network (and everyone else) to have a turn.
                    without_yield = _MAX_WITHOUT_YIELD
                # Not kept alive (with its frame) while waiting for the next one.
                del request

    def idle_fraction(self) -> float:
        """RequestHandlerAvgIdlePercent over about the last 30 s; reading changes nothing.

        A handler parked on an empty queue counts as idle up to now, so an idle broker
        reads 1.0 rather than 0 (its waits have not ended yet).
        """
        now = time.perf_counter_ns()
        open_waits = sum(now - h.wait_started_ns for h in self._handlers if h.waiting)
        return self._idle_share.share(self._idle_ns + open_waits, len(self._handlers))
