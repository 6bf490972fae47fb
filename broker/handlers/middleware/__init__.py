"""The request pipeline: an ordered list of middleware around every handler.

Every request of every listener (the clients' and the cluster's internal one) goes
through the same chain, built once per handler: each middleware receives the request,
the handler and the rest of the chain (`call_next`), and returns the outcome (a
response body, NoResponse, CloseConnection or Deferred). Middleware that need the final
answer of a deferred request use `then`, which applies them when the answer comes
instead of holding a handler task. The order is fixed by `Stage`, not by when a
middleware was registered, so wiring order cannot change behaviour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from enum import IntEnum
from typing import Protocol

from broker.handlers.api_handler import ApiHandler, Deferred, Outcome
from broker.net.request import Request

Next = Callable[[Request], Awaitable[Outcome]]


class Stage(IntEnum):
    """Where a middleware sits: lower stages run first, around the higher ones."""

    PRINCIPAL = 10  # the listener's principal, before anything reads it
    QUOTAS = 20  # client quotas: see the final answer, error responses included
    ERRORS = 30  # the handler boundary: local completion stamped, exceptions mapped
    AUTHORIZATION = 40  # cluster-action checks
    REPLICATION_WAITS = 50  # answers that wait on an ISR leave the handler task


class Middleware(Protocol):
    """One cross-cutting concern around the handlers."""

    @property
    def stage(self) -> Stage: ...

    def applies_to(self, handler: ApiHandler) -> bool:
        """Whether this middleware wraps `handler` at all (decided once per chain)."""
        ...

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        """Answer `request`, usually by awaiting `call_next(request)`."""
        ...


def build_chain(handler: ApiHandler, middleware: Iterable[Middleware]) -> Next:
    """`handler.handle` inside every middleware that applies to it, lowest stage outermost.

    Each layer is bound to its handler and the rest of the chain in a closure over its
    bound `__call__`: the cheapest binding measured (a partial with keywords copies a
    dict per call; an object's `__call__` goes through the type's slot lookup)."""
    call: Next = handler.handle
    for layer in sorted(middleware, key=lambda m: m.stage, reverse=True):
        if layer.applies_to(handler):
            call = _bound(layer, handler, call)
    return call


def _bound(layer: Middleware, handler: ApiHandler, call_next: Next) -> Next:
    """`layer` around `call_next`, as a one-argument call (see `build_chain`)."""
    answer = layer.__call__

    def link(request: Request) -> Awaitable[Outcome]:
        return answer(request, handler, call_next)

    return link


def then(outcome: Outcome, answer: Callable[[Outcome], Outcome]) -> Outcome:
    """`answer(outcome)`, or for a Deferred, a Deferred whose answers go through `answer`."""
    if not isinstance(outcome, Deferred):
        return answer(outcome)
    wait, early = outcome.wait, outcome.early

    async def waited() -> Outcome:
        return answer(await wait())

    if early is None:
        return Deferred(waited)
    hurry = early

    async def hurried() -> Outcome:
        return answer(await hurry())

    return Deferred(waited, hurried)
