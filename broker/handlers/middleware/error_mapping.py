"""The handler boundary: error mapping and the request's local time.

An exception from a handler (or from the middleware inside this one) becomes the API's
error response, as Kafka's getErrorResponse: the error code on every item,
UNKNOWN_SERVER_ERROR for anything that is not a KafkaError, logged once; an API
without an error response closes the connection instead.

The request metrics' local time ends when the handler returns (for a deferred answer,
when it defers), stamped here so that the middleware outside (quotas' request time)
read it. The per-API histograms and the request log are written once the response is
sent (broker/net/request_metrics.py), where the send and total times are known, as
Kafka's RequestChannel does. One layer for both: each layer costs a coroutine frame
on every request."""

from __future__ import annotations

import logging
import time

from broker.handlers.api_handler import ApiHandler, CloseConnection, Deferred, Outcome
from broker.handlers.common import error_code_of
from broker.handlers.middleware import Next, Stage
from broker.net.request import Request
from broker.protocol.api import API_NAMES
from broker.protocol.error_codes import ErrorCode

log = logging.getLogger("broker.handlers.kafka_apis")


class ErrorMapping:
    stage = Stage.ERRORS

    def applies_to(self, handler: ApiHandler) -> bool:
        return True

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        try:
            outcome = await call_next(request)
        except Exception as exc:
            return error_outcome(handler, request, exc)
        request.api_local_complete_ns = time.perf_counter_ns()
        if isinstance(outcome, Deferred):
            return _guarded(handler, request, outcome)
        return outcome


def _guarded(handler: ApiHandler, request: Request, deferred: Deferred) -> Deferred:
    """The deferred answer, its failures mapped like the handler's own."""
    wait, early = deferred.wait, deferred.early

    async def waited() -> Outcome:
        try:
            return await wait()
        except Exception as exc:
            return error_outcome(handler, request, exc)

    if early is None:
        return Deferred(waited)
    hurry = early

    async def hurried() -> Outcome:
        try:
            return await hurry()
        except Exception as exc:
            return error_outcome(handler, request, exc)

    return Deferred(waited, hurried)


def error_outcome(handler: ApiHandler, request: Request, exc: Exception) -> Outcome:
    """The API's response with the exception's error code, or a close if it has none."""
    error_code = error_code_of(exc)
    name = API_NAMES.get(request.api_key, str(request.api_key))
    if error_code == ErrorCode.UNKNOWN_SERVER_ERROR:
        log.error("error handling %s request %s", name, request.header, exc_info=exc)
    else:
        log.info("%s request failed: %s (%s)", name, exc, ErrorCode(error_code).name)
    try:
        body = handler.error_response(request, error_code)
    except Exception:
        log.exception("error building the %s error response", name)
        body = None
    if body is None:
        return CloseConnection(f"{name} failed: {exc}")
    return body
