"""KafkaApis: dispatch by api key, and turn outcomes into responses.

Handlers only ever return bodies (or the outcomes in api_handler); encoding,
response headers, the ApiVersions header-v0 rule, error responses for
exceptions and the local-completion timestamps live here, once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import trio

from broker.handlers.api_handler import ApiHandler, CloseConnection, Deferred, NoResponse
from broker.net.request import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    SendResponse,
)
from broker.net.request_channel import RequestChannel
from broker.protocol.api import API_NAMES, encode_response
from broker.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)


class ClientQuotaHooks(Protocol):
    """Client quotas around the handlers (broker/quotas/quota_managers.py)."""

    def before_handle(self, request: Request) -> None: ...

    def on_response(
        self, request: Request, outcome: Any, response_size: Callable[[Any], int]
    ) -> tuple[Any, int]: ...

    def on_sent(self, request: Request) -> Callable[[], None] | None: ...


class KafkaApis:
    """The API layer shared by every handler of every plane."""

    def __init__(self, handlers: Iterable[ApiHandler]) -> None:
        self._handlers: dict[int, ApiHandler] = {h.api_key: h for h in handlers}
        self._deferred: trio.Nursery | None = None
        self._hurrying = False
        self._hurryable: set[trio.CancelScope] = set()
        self.deferred_waiting = 0  # answers waiting outside a handler task (Kafka's purgatory)
        self._supported: dict[int, tuple[int, int]] | None = None
        self.quotas: ClientQuotaHooks | None = None

    def add_handler(self, handler: ApiHandler) -> None:
        self._handlers[handler.api_key] = handler
        self._supported = None

    def handler(self, api_key: int) -> ApiHandler:
        """The handler registered for `api_key` (KeyError when there is none)."""
        return self._handlers[api_key]

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        """What ApiVersions advertises: exactly the versions the handlers implement.

        The same dict object is returned until a handler is added, so callers
        may cache what they derive from it by identity.
        """
        if self._supported is None:
            self._supported = {
                key: (h.min_version, h.max_version) for key, h in sorted(self._handlers.items())
            }
        return self._supported

    def is_enabled(self, api_key: int, api_version: int) -> bool:
        handler = self._handlers.get(api_key)
        return handler is not None and handler.min_version <= api_version <= handler.max_version

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the nursery where deferred responses wait; runs until cancelled."""
        async with trio.open_nursery() as nursery:
            self._deferred = nursery
            task_status.started()
            await trio.sleep_forever()

    async def handle(self, request: Request, channel: RequestChannel) -> None:
        handler = self._handlers[request.api_key]
        if self.quotas is not None:
            self.quotas.before_handle(request)
        try:
            outcome = await handler.handle(request)
        except Exception as exc:
            self._answer_error(handler, request, channel, exc)
            return
        request.api_local_complete_ns = time.perf_counter_ns()
        if isinstance(outcome, Deferred):
            if self._deferred is None:
                raise RuntimeError("KafkaApis.run() is not running")
            self._deferred.start_soon(self._complete_deferred, handler, request, channel, outcome)
            return
        self._send(handler, request, channel, outcome)

    def hurry_deferred(self) -> None:
        """Shutdown: deferred answers that can be given early are given now."""
        self._hurrying = True
        for scope in self._hurryable:
            scope.cancel()

    async def _complete_deferred(
        self, handler: ApiHandler, request: Request, channel: RequestChannel, deferred: Deferred
    ) -> None:
        self.deferred_waiting += 1
        try:
            outcome = await self._await_deferred(request, deferred)
        except Exception as exc:
            self._answer_error(handler, request, channel, exc)
            return
        finally:
            self.deferred_waiting -= 1
        self._send(handler, request, channel, outcome)

    async def _await_deferred(self, request: Request, deferred: Deferred) -> Any:
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

    def _send(
        self, handler: ApiHandler, request: Request, channel: RequestChannel, outcome: Any
    ) -> None:
        request.response_complete_ns = time.perf_counter_ns()
        if not request.api_local_complete_ns:
            request.api_local_complete_ns = request.response_complete_ns
        version = 0 if request.unsupported_version else request.api_version
        encoded: list[tuple[Any, Any]] = []
        quota_throttle_ms = 0
        if self.quotas is not None:

            def response_size(body: Any) -> int:
                chunks = encode_response(request.api_key, version, request.correlation_id, body)
                encoded.append((body, chunks))
                return sum(len(chunk) for chunk in chunks)

            try:
                outcome, quota_throttle_ms = self.quotas.on_response(
                    request, outcome, response_size
                )
            except Exception:
                # Quota accounting must never cost the client its answer.
                log.exception("client quota accounting failed for %s", request.header)
        if isinstance(outcome, NoResponse):
            if quota_throttle_ms > 0:
                channel.start_throttling(request, quota_throttle_ms)
            channel.send_response(NoOpResponse(request))
        elif isinstance(outcome, CloseConnection):
            log.info("closing connection %s: %s", request.context.connection_id, outcome.reason)
            channel.send_response(CloseConnectionResponse(request))
        else:
            if encoded and encoded[-1][0] is outcome:
                chunks = encoded[-1][1]
            else:
                chunks = encode_response(request.api_key, version, request.correlation_id, outcome)
            throttle_ms = max(getattr(outcome, "throttle_time_ms", 0) or 0, quota_throttle_ms)
            if throttle_ms > 0:
                channel.start_throttling(request, throttle_ms)
            on_sent = self.quotas.on_sent(request) if self.quotas is not None else None
            channel.send_response(
                SendResponse(request, chunks, on_complete=on_sent, log_body=outcome)
            )

    def _answer_error(
        self, handler: ApiHandler, request: Request, channel: RequestChannel, exc: Exception
    ) -> None:
        """Kafka's getErrorResponse: the error on every item, or a close if there is none."""
        error_code = getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
        name = API_NAMES.get(request.api_key, str(request.api_key))
        if error_code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.exception("error handling %s request %s", name, request.header)
        else:
            log.info("%s request failed: %s (%s)", name, exc, ErrorCode(error_code).name)
        try:
            body = handler.error_response(request, int(error_code))
        except Exception:
            log.exception("error building the %s error response", name)
            body = None
        if body is None:
            self._send(handler, request, channel, CloseConnection(f"{name} failed: {exc}"))
        else:
            self._send(handler, request, channel, body)
