"""What travels through the request channel: requests in, responses out.

A request carries its connection's context so that handlers never need to
reach back into the processor, and timestamps so that the per-API latency
metrics (queue, local, remote, response-queue, send, total) can be derived
when the response completes, as Kafka's RequestChannel does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Generic

import attrs
from typing_extensions import TypeVar

from broker.net.response_memory import ResponseMemory
from broker.protocol.api import RequestHeader

Buffer = bytes | bytearray | memoryview

BodyT = TypeVar("BodyT", default=Any)
"""A request's body type (a generated `...Request` class); `Request` alone is `Request[Any]`."""

ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"
CLUSTER_PRINCIPAL = "User:__cluster"
"""The principal of the cluster's own processes (their internal listener's connections),
as Kafka's inter-broker listener's broker principal: allowed CLUSTER_ACTION, exempt from
client quotas."""


@attrs.frozen
class ClientInformation:
    """Client software name and version from ApiVersions v3+ (KIP-511)."""

    software_name: str = "unknown"
    software_version: str = "unknown"


@attrs.frozen
class RequestContext:
    """Who sent a request and through which listener."""

    connection_id: str
    processor_id: int
    listener_name: str
    security_protocol: str
    client_address: str
    client_port: int
    client_information: ClientInformation
    principal: str = ANONYMOUS_PRINCIPAL


@attrs.define(slots=True, eq=False)
class Request(Generic[BodyT]):
    """One decoded request; timing fields are filled in as it moves along.

    `body` is None only for an ApiVersions request of an unsupported version,
    whose body Kafka deliberately leaves unparsed (`unsupported_version`).
    `memory_bytes` is what the request holds in the memory pool; its processor
    releases it once the response is written (or the connection closed).
    """

    header: RequestHeader
    body: BodyT
    context: RequestContext
    size_bytes: int
    memory_bytes: int = 0
    unsupported_version: bool = False
    start_ns: int = attrs.field(factory=time.perf_counter_ns)
    dequeue_ns: int = 0
    api_local_complete_ns: int = 0
    response_complete_ns: int = 0
    response_dequeue_ns: int = 0
    throttle_ms: int = 0
    release: Callable[[], None] | None = None
    response_memory: ResponseMemory | None = None
    response_memory_bytes: int = 0
    on_deferred: Callable[[], None] | None = None
    """Set by the processor: called when the answer is deferred (a long wait begins,
    during which the connection is watched for its peer hanging up)."""
    hurry: Callable[[], None] | None = None
    """Set by the API layer while a deferred answer can be given early, at once."""
    quota_throttle_ms: int = 0
    """Set by the client-quota middleware: how long the channel stays muted after the answer."""
    on_sent: Callable[[], None] | None = None
    """Set by the client-quota middleware: run once the response is written."""
    encoded_response: tuple[object, Sequence[Buffer]] | None = None
    """A response body already encoded on the way (to measure it), and its frame."""
    bulk_on_loop: bool = False
    """Set by the handler pool: a large request taken while no small request waits to
    be protected (bulk_turns.BulkTurns.quiet), whose bulk work (a batch's write into the
    log) may run on the event loop instead of a worker thread."""

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    def release_memory(self) -> None:
        """Give the request's bytes back to the memory pool, and its response's to the
        response budget, at most once."""
        release, self.release = self.release, None
        if release is not None:
            release()
        self._release_response_memory()
        # Done (answered, or its connection closed): a long poll still running reads for
        # a response that will be dropped, and must not count it where no one releases it.
        self.response_memory = None

    def reserve_response_memory(self, wanted: int) -> int:
        """Up to `wanted` bytes of response budget (see response_memory), replacing any
        earlier reservation of this request (a long poll reads again)."""
        self._release_response_memory()
        budget = self.response_memory
        if budget is None:
            return wanted
        granted = budget.grant(wanted)
        self.response_memory_bytes = granted
        return granted

    def keep_response_memory(self, used: int) -> None:
        """Hold what the response actually took, until the response is written."""
        budget = self.response_memory
        if budget is not None:
            self.response_memory_bytes = budget.settle(self.response_memory_bytes, used)

    def _release_response_memory(self) -> None:
        held, self.response_memory_bytes = self.response_memory_bytes, 0
        if held and self.response_memory is not None:
            self.response_memory.release(held)


@attrs.define(slots=True, eq=False)
class SendResponse:
    """Write `chunks` (a whole size-prefixed frame) to the connection.

    Not frozen, though never changed: one is built per request, and a frozen class's
    `__init__` (object.__setattr__ per field) costs about a µs more."""

    request: Request
    chunks: Sequence[Buffer]
    on_complete: Callable[[], None] | None = None
    log_body: Any = None


@attrs.define(slots=True, eq=False)
class NoOpResponse:
    """Nothing to write (acks=0 produce), but the request is complete."""

    request: Request


@attrs.frozen
class CloseConnectionResponse:
    """Close the connection instead of answering (e.g. a failed acks=0 produce)."""

    request: Request


@attrs.frozen
class StartThrottlingResponse:
    """The channel stays muted after the response until EndThrottling."""

    request: Request


@attrs.frozen
class EndThrottlingResponse:
    """The throttle period of the request is over."""

    request: Request


Response = (
    SendResponse
    | NoOpResponse
    | CloseConnectionResponse
    | StartThrottlingResponse
    | EndThrottlingResponse
)
