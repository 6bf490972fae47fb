"""What an API handler is, and the outcomes it can return.

A handler turns a request into a response body. Two outcomes are not bodies:
`NoResponse` (acks=0 produce succeeded: nothing is written, but the request
is complete) and `CloseConnection` (a failed acks=0 produce: the client
expects no answer, so closing is how it learns). `Deferred` lets a handler
return at once and answer later (long-poll fetch, group joins) without
holding a handler task: the API layer awaits it in its own nursery.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs

from broker.net.request import Request


@attrs.frozen
class NoResponse:
    """The request is complete and nothing is sent."""


@attrs.frozen
class CloseConnection:
    """Close the connection instead of answering."""

    reason: str


@attrs.frozen
class Deferred:
    """Answer later: the API layer awaits `wait()` outside the handler task.

    `early`, when given, answers at once with what there is: a graceful shutdown calls
    it instead of waiting out a long poll (a Fetch may ask to wait for many minutes).
    """

    wait: Callable[[], Awaitable[Any]]
    early: Callable[[], Awaitable[Any]] | None = None


class ApiHandler(Protocol):
    """One API: the versions it implements and how it answers."""

    @property
    def api_key(self) -> int:
        """An `ApiKey` member in every handler; read-only, so subtypes of int satisfy it."""
        ...

    min_version: int
    max_version: int

    async def handle(self, request: Request) -> Any:
        """Return a response body, NoResponse, CloseConnection or Deferred."""
        ...

    def error_response(self, request: Request, error_code: int) -> Any:
        """The API's response with `error_code` on every item, or None if it has none."""
        ...
