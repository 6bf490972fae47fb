"""Client quotas around the handlers (Kafka's QuotaManagers, broker/quotas/): a fetch
capped to its quota window before the handler, the throttle recorded on the final
answer (a deferred one when it comes), a throttled answer's channel muted after it
(KIP-219). The cluster's own requests are exempt, as Kafka exempts its brokers'."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from broker.handlers.api_handler import ApiHandler, CloseConnection, Deferred, NoResponse, Outcome
from broker.handlers.middleware import Next, Stage, then
from broker.net.request import CLUSTER_PRINCIPAL, Request
from broker.protocol.api import encode_response

log = logging.getLogger("broker.handlers.kafka_apis")
_NOT_SENT = (NoResponse, CloseConnection)


class ClientQuotaHooks(Protocol):
    """What the quota managers answer (broker/quotas/quota_managers.py)."""

    def before_handle(self, request: Request) -> None: ...

    def on_response(
        self, request: Request, outcome: Any, response_size: Callable[[Any], int]
    ) -> tuple[Any, int]: ...

    def on_sent(self, request: Request) -> Callable[[], None] | None: ...


class ClientQuotas:
    stage = Stage.QUOTAS

    def __init__(self, hooks: ClientQuotaHooks) -> None:
        self._hooks = hooks

    def applies_to(self, handler: ApiHandler) -> bool:
        return True

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        if request.context.principal == CLUSTER_PRINCIPAL:
            return await call_next(request)
        self._hooks.before_handle(request)
        outcome = await call_next(request)
        if isinstance(outcome, Deferred):
            return then(outcome, functools.partial(self._answered, request))
        return self._answered(request, outcome)

    def _answered(self, request: Request, outcome: Outcome) -> Outcome:
        """Record the answer; its throttle and what runs once it is written go on the
        request, for the API layer that sends it."""

        def response_size(body: Any) -> int:
            version = 0 if request.unsupported_version else request.api_version
            chunks = encode_response(request.api_key, version, request.correlation_id, body)
            request.encoded_response = (body, chunks)
            return sum(len(chunk) for chunk in chunks)

        try:
            outcome, request.quota_throttle_ms = self._hooks.on_response(
                request, outcome, response_size
            )
        except Exception:
            # Quota accounting must never cost the client its answer.
            log.exception("client quota accounting failed for %s", request.header)
        if not isinstance(outcome, _NOT_SENT):
            request.on_sent = self._hooks.on_sent(request)
        return outcome
