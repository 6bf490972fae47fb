"""Request metrics' local time: stamped as the handler returns (for a deferred answer,
as it defers), the innermost middleware, so that every other middleware's work counts
as the request's, not the handler's. The per-API latency histograms and the request log
are written once the response is sent (broker/net/request_metrics.py), where the send
and total times are known, as Kafka's RequestChannel does."""

from __future__ import annotations

import time

from broker.handlers.api_handler import ApiHandler, Outcome
from broker.handlers.middleware import Next, Stage
from broker.net.request import Request


class LocalCompletion:
    stage = Stage.TIMING

    def applies_to(self, handler: ApiHandler) -> bool:
        return True

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        outcome = await call_next(request)
        request.api_local_complete_ns = time.perf_counter_ns()
        return outcome
