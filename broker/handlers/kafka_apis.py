"""KafkaApis: dispatch by api key through the middleware, and turn outcomes into
responses.

Handlers only ever return bodies (or the outcomes in api_handler); the cross-cutting
work is the middleware's (broker/handlers/middleware/: principal, quotas, error mapping
and local time, authorization), in one chain per handler for every listener, the cluster's
internal one included. Encoding, response headers, the ApiVersions header-v0 rule and
throttling the channel live here, once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import trio

from broker.handlers.api_handler import ApiHandler, CloseConnection, Deferred, NoResponse, Outcome
from broker.handlers.middleware import Middleware, Next, build_chain
from broker.handlers.middleware.deferred_answers import DeferredAnswers
from broker.handlers.middleware.error_mapping import ErrorMapping
from broker.handlers.middleware.principal import ListenerPrincipals
from broker.handlers.middleware.replication_waits import ReplicationWaits
from broker.net.request import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    SendResponse,
)
from broker.net.request_channel import RequestChannel
from broker.protocol.api import encode_response

log = logging.getLogger(__name__)


def standard_middleware(fixed_principals: dict[str, str] | None = None) -> list[Middleware]:
    """What every broker runs: listeners' principals, error mapping (with the local-time
    stamp), and answers that wait on replication deferred. Quotas and authorization are
    added by their wiring (they need their collaborators)."""
    return [ListenerPrincipals(fixed_principals or {}), ErrorMapping(), ReplicationWaits()]


class KafkaApis:
    """The API layer shared by every handler of every listener."""

    def __init__(
        self, handlers: Iterable[ApiHandler], middleware: Iterable[Middleware] | None = None
    ) -> None:
        self._handlers: dict[int, ApiHandler] = {h.api_key: h for h in handlers}
        self._middleware: list[Middleware] = (
            standard_middleware() if middleware is None else list(middleware)
        )
        self._chains: dict[int, Next] = {}
        self._deferred = DeferredAnswers()
        self._supported: dict[int, tuple[int, int]] | None = None

    def add_handler(self, handler: ApiHandler) -> None:
        self._handlers[handler.api_key] = handler
        self._chains.pop(handler.api_key, None)
        self._supported = None

    def use(self, middleware: Middleware) -> None:
        """Add a middleware; its stage, not the order of calls, says where it runs."""
        self._middleware.append(middleware)
        self._chains.clear()

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

    @property
    def deferred_waiting(self) -> int:
        """Answers waiting outside a handler task (Kafka's purgatory)."""
        return self._deferred.waiting

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the nursery where deferred responses wait; runs until cancelled."""
        await self._deferred.run(task_status=task_status)

    async def handle(self, request: Request, channel: RequestChannel) -> None:
        chain = self._chains.get(request.api_key)
        if chain is None:
            chain = build_chain(self._handlers[request.api_key], self._middleware)
            self._chains[request.api_key] = chain
        outcome = await chain(request)
        if isinstance(outcome, Deferred):
            self._deferred.start(
                request, outcome, lambda answer: self._send(request, channel, answer)
            )
            return
        self._send(request, channel, outcome)

    def hurry_deferred(self) -> None:
        """Shutdown: deferred answers that can be given early are given now."""
        self._deferred.hurry()

    def _send(self, request: Request, channel: RequestChannel, outcome: Outcome) -> None:
        request.response_complete_ns = time.perf_counter_ns()
        if not request.api_local_complete_ns:
            request.api_local_complete_ns = request.response_complete_ns
        if isinstance(outcome, NoResponse):
            if request.quota_throttle_ms > 0:
                channel.start_throttling(request, request.quota_throttle_ms)
            channel.send_response(NoOpResponse(request))
        elif isinstance(outcome, CloseConnection):
            log.info("closing connection %s: %s", request.context.connection_id, outcome.reason)
            channel.send_response(CloseConnectionResponse(request))
        else:
            encoded, request.encoded_response = request.encoded_response, None
            if encoded is not None and encoded[0] is outcome:
                chunks = encoded[1]
            else:
                version = 0 if request.unsupported_version else request.api_version
                chunks = encode_response(request.api_key, version, request.correlation_id, outcome)
            throttle_ms = max(
                getattr(outcome, "throttle_time_ms", 0) or 0, request.quota_throttle_ms
            )
            if throttle_ms > 0:
                channel.start_throttling(request, throttle_ms)
            channel.send_response(
                SendResponse(request, chunks, on_complete=request.on_sent, log_body=outcome)
            )
