"""One client connection as its processor holds it: the sans-IO state and its Trio parts.

The protocol state is a `KafkaConnection` (kafka_connection.py); this adds what only
the Trio side has: the byte stream (any `trio.abc.Stream`; TLS replaces a plain one
once its handshake is done), the cancel scope the reapers and shutdown cancel, the
channel its responses arrive on, and the request in flight (whose pool bytes the
close releases).
"""

from __future__ import annotations

import math
import mmap

import trio

from broker.net.kafka_connection import KafkaConnection
from broker.net.request import ClientInformation, Request, RequestContext, Response


class Connection:
    """State of one accepted connection; owned by exactly one connection task."""

    __slots__ = (
        "bulk_client",
        "closing",
        "expired",
        "first_request",
        "hang_up_watched",
        "id",
        "in_flight",
        "large_frame",
        "listener_name",
        "local_address",
        "protocol",
        "remote_address",
        "responses_in",
        "responses_out",
        "scope",
        "stream",
    )

    def __init__(
        self,
        protocol: KafkaConnection,
        stream: trio.abc.Stream,
        listener_name: str,
        local_address: tuple[str, int],
        remote_address: tuple[str, int],
    ) -> None:
        self.protocol = protocol
        self.id = protocol.context.connection_id
        self.stream = stream
        self.listener_name = listener_name
        self.local_address = local_address
        self.remote_address = remote_address
        self.in_flight: Request | None = None
        # Decoded before the connection's task started (first_read), not yet dispatched.
        self.first_request: Request | None = None
        self.closing = False
        self.expired = False
        # Whether it has sent a large request (a producer): its small ones are not what
        # bulk turns protect (bulk_turns.py).
        self.bulk_client = False
        # Whether the hang-up watcher watches its socket (a wait for the pool or for a
        # deferred answer): the common request has nothing to unwatch.
        self.hang_up_watched = False
        # An answered frame of its own mapping (MAPPED_FRAME and up) and its pool bytes,
        # given back once the task has yielded (connection_task).
        self.large_frame: tuple[mmap.mmap, int] | None = None
        # Responses routed here by the processor; unbounded because at most one
        # request is in flight, so at most a handful of responses can queue.
        self.responses_out, self.responses_in = trio.open_memory_channel[Response](math.inf)
        self.scope = trio.CancelScope()

    @property
    def context(self) -> RequestContext:
        return self.protocol.context

    @property
    def client_information(self) -> ClientInformation:
        return self.protocol.client_information

    @property
    def last_active(self) -> float:
        """Trio time of the last bytes received or response written."""
        return self.protocol.last_active

    @property
    def remote_ip(self) -> str:
        return self.remote_address[0]
