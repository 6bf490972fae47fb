"""One client connection as a processor sees it.

The byte stream is any `trio.abc.Stream`, so TLS or SASL can wrap it later
without the processor noticing. The mute state machine is the per-connection
capacity limiter: a request is read only from NOT_MUTED, and the connection
returns there only after the response is written (or a no-op processed) and
any throttle period has ended, so one request is in flight at a time.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import trio

from broker.net.mute_state import ChannelMuteStateMachine
from broker.net.read_deadline import ReadDeadline
from broker.net.request import ClientInformation, Request, RequestContext, Response
from broker.protocol.framing import FrameDecoder

if TYPE_CHECKING:
    from broker.net.channel_security import SaslChannel


class Connection:
    """State of one accepted connection; owned by exactly one processor task."""

    __slots__ = (
        "client_information",
        "closing",
        "context",
        "decoder",
        "expired",
        "first_request",
        "id",
        "in_flight",
        "last_active",
        "listener_name",
        "local_address",
        "mute",
        "read_deadline",
        "remote_address",
        "responses_in",
        "responses_out",
        "sasl",
        "scope",
        "stream",
    )

    def __init__(
        self,
        connection_id: str,
        stream: trio.abc.Stream,
        listener_name: str,
        local_address: tuple[str, int],
        remote_address: tuple[str, int],
        max_request_size: int,
        decoder: FrameDecoder | None = None,
    ) -> None:
        self.id = connection_id
        self.stream = stream
        self.listener_name = listener_name
        self.local_address = local_address
        self.remote_address = remote_address
        self.decoder = decoder if decoder is not None else FrameDecoder(max_request_size)
        self.mute = ChannelMuteStateMachine()
        self.read_deadline = ReadDeadline()
        self.client_information = ClientInformation()
        self.context: RequestContext  # set by the processor at registration
        self.in_flight: Request | None = None
        # Decoded before the connection's task started (first_read), not yet dispatched.
        self.first_request: Request | None = None
        self.sasl: SaslChannel | None = None  # SASL listeners: screens requests (authenticator)
        self.closing = False
        self.expired = False
        # Responses routed here by the processor; unbounded because at most one
        # request is in flight, so at most a handful of responses can queue.
        self.responses_out, self.responses_in = trio.open_memory_channel[Response](math.inf)
        self.scope = trio.CancelScope()
        self.last_active = time.monotonic()

    def touch(self) -> None:
        """Record activity; the processor's idle reaper reads it."""
        self.last_active = time.monotonic()

    @property
    def remote_ip(self) -> str:
        return self.remote_address[0]
