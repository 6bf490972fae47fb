"""Deferred answers (Kafka's purgatory): a handler that returns `Deferred` frees its
handler task at once; the answer is awaited here, in a nursery of the API layer, and
sent when it comes. A graceful shutdown (or the client hanging up) hurries the answers
that can be given early."""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.handlers.api_handler import CloseConnection, Deferred, Outcome
from broker.net.request import Request

log = logging.getLogger("broker.handlers.kafka_apis")

Answer = Callable[[Outcome], None]


class DeferredAnswers:
    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None
        self._hurrying = False
        self._hurryable: set[trio.CancelScope] = set()
        self.waiting = 0  # answers waiting outside a handler task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the nursery where deferred answers wait; runs until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def start(self, request: Request, deferred: Deferred, answer: Answer) -> None:
        """Await `deferred` apart from the caller, then `answer(outcome)`."""
        if self._nursery is None:
            raise RuntimeError("KafkaApis.run() is not running")
        self._nursery.start_soon(self._complete, request, deferred, answer)

    def hurry(self) -> None:
        """Shutdown: deferred answers that can be given early are given now."""
        self._hurrying = True
        for scope in self._hurryable:
            scope.cancel()

    async def _complete(self, request: Request, deferred: Deferred, answer: Answer) -> None:
        self.waiting += 1
        try:
            outcome = await self._await(request, deferred)
        except Exception as exc:
            # The error mapping answers a deferred request's failures; this is the net
            # under it, so that no failure takes the API layer's nursery down.
            log.exception("error completing a deferred answer to %s", request.header)
            outcome = CloseConnection(f"deferred answer failed: {exc}")
        finally:
            self.waiting -= 1
        answer(outcome)

    async def _await(self, request: Request, deferred: Deferred) -> Outcome:
        if request.on_deferred is not None:
            request.on_deferred()
        if deferred.early is None:
            return await deferred.wait()
        if not self._hurrying:
            with trio.CancelScope() as scope:
                self._hurryable.add(scope)
                # The processor hurries it when the client hangs up (hang_up_watcher).
                request.hurry = scope.cancel
                try:
                    return await deferred.wait()
                finally:
                    request.hurry = None
                    self._hurryable.discard(scope)
        return await deferred.early()
