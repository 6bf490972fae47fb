"""The two answers to a request that are not a response body.

`NoResponse` (acks=0 produce succeeded: nothing is written, but the request is complete)
and `CloseConnection` (a failed acks=0 produce: the client expects no answer, so closing
is how it learns). They live beside `Request`, below the API layer, because what they
mean happens on the connection, and because the layers between the handlers and the
network (the client quotas) must tell them apart without importing the handlers.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class NoResponse:
    """The request is complete and nothing is sent."""


@attrs.frozen
class CloseConnection:
    """Close the connection instead of answering."""

    reason: str
