"""What an API handler is, and the outcomes it can return.

A handler turns a request into a response body. Two outcomes are not bodies:
`NoResponse` and `CloseConnection` (broker/net/unsent_answers.py, re-exported here for
the handlers). `Deferred` lets a handler
return at once and answer later (long-poll fetch, group joins) without
holding a handler task: the API layer awaits it in its own nursery.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
from typing_extensions import TypeVar

from broker.net.request import Request
from broker.net.unsent_answers import CloseConnection, NoResponse

ReqT = TypeVar("ReqT", default=Any)
"""The request body a handler takes (a generated `...Request` class)."""
RespT = TypeVar("RespT", default=Any, covariant=True)
"""The response body a handler answers with (a generated `...Response` class)."""

__all__ = ["ApiHandler", "CloseConnection", "Deferred", "NoResponse", "Outcome"]


@attrs.frozen
class Deferred:
    """Answer later: the API layer awaits `wait()` outside the handler task.

    `early`, when given, answers at once with what there is: a graceful shutdown calls
    it instead of waiting out a long poll (a Fetch may ask to wait for many minutes).
    """

    wait: Callable[[], Awaitable[Any]]
    early: Callable[[], Awaitable[Any]] | None = None


Outcome = Any
"""What the pipeline carries back from a handler: a response body, NoResponse,
CloseConnection or Deferred."""


class ApiHandler(Protocol[ReqT, RespT]):
    """One API: the versions it implements and how it answers.

    Typed by its request and response bodies (`ApiHandler[ProduceRequest,
    ProduceResponse]`); a handler whose `handle` takes a plain `Request` is an
    `ApiHandler[Any, ...]`. Cross-cutting work (principal, authorization, quotas,
    error mapping, timing) is the middleware's (broker/handlers/middleware/), not the
    handler's.
    """

    @property
    def api_key(self) -> int:
        """An `ApiKey` member in every handler; read-only, so subtypes of int satisfy it."""
        ...

    min_version: int
    max_version: int

    async def handle(
        self, request: Request[ReqT]
    ) -> RespT | NoResponse | CloseConnection | Deferred:
        """Return a response body, NoResponse, CloseConnection or Deferred."""
        ...

    def error_response(self, request: Request[ReqT], error_code: int) -> RespT | None:
        """The API's response with `error_code` on every item, or None if it has none."""
        ...
