"""One client connection's protocol state, sans-IO (Kafka's KafkaChannel without a socket).

Everything a processor decides about a connection, without doing any I/O: the frame
decoder, the memory-pool admission of each frame, the read deadline, decoding and
KIP-511, SASL screening (through the sans-IO `SaslAuthenticator`), the mute table that
keeps one request in flight, and which bytes each response becomes. Its Trio task
(`connection_task.py`) only moves bytes and waits: it feeds what it read to
`receive_data` and acts on the event returned, and writes what `send` returns.

States and their events:
- READING: `receive_data` / `next_event` give `NeedData` (read more), `NeedMemory`
  (the next frame's size is known: the pool must admit it), `RequestReceived` (hand it
  to the API layer: the connection is now RESPONDING), `SaslAnswer` (the authenticator
  answered the frame itself) or `EndOfStream`.
- AWAITING_MEMORY: nothing is read until `grant_memory()`; it then goes on as READING.
- RESPONDING: muted; `send(response)` for each response of the request in flight,
  until the mute table says the connection may read again (READING).
- CLOSED: a response asked to close, or SASL failed; nothing more is accepted.
Calls out of turn raise `IllegalConnectionState`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import NamedTuple, NoReturn

import attrs

from broker.net.authenticator import Action, Event, SaslAuthenticator, State, Verdict
from broker.net.mute_state import ChannelMuteStateMachine, MuteEvent
from broker.net.read_deadline import ReadDeadline
from broker.net.request import (
    Buffer,
    ClientInformation,
    CloseConnectionResponse,
    EndThrottlingResponse,
    NoOpResponse,
    RequestContext,
    Response,
    SendResponse,
    StartThrottlingResponse,
)
from broker.net.request_decoding import (
    API_VERSIONS_KEY,
    Decoded,
    IsEnabled,
    client_information,
    decode_frame,
)
from broker.protocol.api import encode_response
from broker.protocol.framing import READ_AHEAD, Frame, FrameDecoder

COALESCE_LIMIT = 256 * 1024
"""Response chunks at least this large are written as they are; smaller runs are joined."""


class ConnectionState(enum.Enum):
    __hash__ = object.__hash__

    READING = "READING"
    AWAITING_MEMORY = "AWAITING_MEMORY"
    RESPONDING = "RESPONDING"
    CLOSED = "CLOSED"


# Members as module constants: reading `ConnectionState.READING` goes through the
# enum's class attribute lookup (about 0.2 µs on Python 3.11), and a request reads
# several of them.
_READING = ConnectionState.READING
_AWAITING_MEMORY = ConnectionState.AWAITING_MEMORY
_RESPONDING = ConnectionState.RESPONDING
_CLOSED = ConnectionState.CLOSED
_REQUEST_RECEIVED = MuteEvent.REQUEST_RECEIVED
_RESPONSE_SENT = MuteEvent.RESPONSE_SENT
_THROTTLE_STARTED = MuteEvent.THROTTLE_STARTED
_THROTTLE_ENDED = MuteEvent.THROTTLE_ENDED


class IllegalConnectionState(Exception):
    """A call the connection's state does not allow (a bug in its task, or a response
    Kafka's mute table rejects): the task closes the connection."""


class NeedData(NamedTuple):
    """Read more bytes (at most `max_bytes`, or into `frame_space()`)."""

    max_bytes: int


class NeedMemory(NamedTuple):
    """The next frame is `size` bytes and the pool cannot admit them now: read nothing
    more until it does (`grant_memory`)."""

    size: int


class RequestReceived(NamedTuple):
    """A request for the API layer; `memory` pool bytes are the task's to release."""

    decoded: Decoded
    frame: Frame
    memory: int


class SaslAnswer(NamedTuple):
    """The authenticator took the frame (a SASL request or a v0 raw token): carry out
    `verdict` (`answer` are its bytes, if any); `memory` pool bytes are free again."""

    verdict: Verdict
    answer: Sequence[Buffer]
    memory: int


class EndOfStream(NamedTuple):
    """The peer stopped sending."""


# Events are tuples (one or two per request): cheaper to make than attrs classes.
ConnectionEvent = NeedData | NeedMemory | RequestReceived | SaslAnswer | EndOfStream
_END = EndOfStream()
_READ_AHEAD = NeedData(READ_AHEAD)  # the common case, between frames: one object for all


class Outgoing(NamedTuple):
    """What a response means for the connection: `chunks` to write (small ones joined);
    `answers`: it is the request's answer (the request's metrics are recorded);
    `close`: close the connection instead."""

    chunks: Sequence[Buffer] = ()
    answers: bool = False
    close: bool = False


_NOTHING = Outgoing()
_ANSWERED = Outgoing(answers=True)
_CLOSE = Outgoing(answers=True, close=True)


def coalesce(chunks: Sequence[Buffer]) -> Sequence[Buffer]:
    """Join runs of small chunks into one write each; large payloads go as they are."""
    if len(chunks) <= 1:
        return chunks
    out: list[Buffer] = []
    pending: list[Buffer] = []
    for chunk in chunks:
        if len(chunk) >= COALESCE_LIMIT:
            if pending:
                out.append(b"".join(pending))
                pending = []
            out.append(chunk)
        else:
            pending.append(chunk)
    if pending:
        out.append(b"".join(pending))
    return out


def sasl_answer(verdict: Verdict, decoded: Decoded | None) -> list[Buffer]:
    """The bytes of the authenticator's answer: a raw token (v0 flow) or a response."""
    if verdict.raw is not None:
        return [len(verdict.raw).to_bytes(4, "big"), verdict.raw]
    if verdict.body is not None and decoded is not None:
        header = decoded.header
        return encode_response(
            header.api_key, header.api_version, header.correlation_id, verdict.body
        )
    return []


class KafkaConnection:
    """The state of one connection; see the module docstring for states and events."""

    __slots__ = (
        "_admitted",
        "_decoder",
        "_is_enabled",
        "_memory",
        "_normal_max_receive",
        "_pending",
        "_read_timeout_s",
        "_try_allocate",
        "client_information",
        "context",
        "last_active",
        "mute",
        "read_deadline",
        "sasl",
        "state",
    )

    def __init__(
        self,
        context: RequestContext,
        decoder: FrameDecoder,
        is_enabled: IsEnabled,
        now: float,
        *,
        try_allocate: Callable[[int], bool] = lambda size: False,
        read_timeout_s: float = 0.0,
        sasl: SaslAuthenticator | None = None,
        sasl_max_receive: int | None = None,
    ) -> None:
        self.context = context
        self._decoder = decoder
        self._is_enabled = is_enabled
        self._try_allocate = try_allocate
        self._read_timeout_s = read_timeout_s
        self.sasl = sasl
        self._normal_max_receive = decoder.max_size
        if sasl is not None and sasl_max_receive is not None:
            # `sasl.server.max.receive.size` caps frames until authentication completes.
            decoder.max_size = min(sasl_max_receive, decoder.max_size)
        self.client_information = context.client_information
        self.mute = ChannelMuteStateMachine()
        self.read_deadline = ReadDeadline()
        self.last_active = now
        self.state = _READING  # read-only outside: the calls change it
        self._admitted = False
        self._pending = 0  # the size announced by NeedMemory
        self._memory = 0  # pool bytes admitted for the frame in progress

    # -- reading ----------------------------------------------------------------------
    @property
    def held_memory(self) -> int:
        """Pool bytes of a frame admitted but not yet handed out (to release on close)."""
        return self._memory

    def drop_frame(self) -> int:
        """The connection is closing: the frame in progress is given up, its buffer let
        go; returns the pool bytes it held (`held_memory`), now for the caller to
        release."""
        held, self._memory = self._memory, 0
        self._decoder.drop_frame()
        return held

    @property
    def max_receive(self) -> int:
        return self._decoder.max_size

    def missing(self) -> int:
        """Bytes the next frame still needs (hang-up checks: can it still arrive whole?)."""
        return self._decoder.missing()

    @property
    def in_frame_buffer(self) -> bool:
        """Whether reads go into an admitted frame's own buffer (`frame_space`)."""
        return self._admitted

    def frame_space(self, limit: int) -> memoryview | None:
        """Where a large frame's next bytes go (see `FrameDecoder.frame_space`); None
        while no admitted frame is in progress."""
        if self.state is not _READING or not self._admitted:
            return None
        return self._decoder.frame_space(limit)

    def receive_data(self, data: Buffer, now: float) -> ConnectionEvent:
        """Bytes read from the peer (empty: end of stream); returns what to do next."""
        if self.state is not _READING:
            self._illegal(_READING)
        if not data:
            return _END
        self.last_active = now
        self._decoder.feed(data)
        return self.next_event(now)

    def received_into(self, count: int, now: float) -> ConnectionEvent:
        """`count` bytes were read into `frame_space()` (0: end of stream)."""
        if self.state is not _READING:
            self._illegal(_READING)
        if not count:
            return _END
        self.last_active = now
        self._decoder.advance(count)
        return self.next_event(now)

    def next_event(self, now: float) -> ConnectionEvent:
        """What to do next from what is buffered (READING only). A frame whose size the
        pool admits at once (`try_allocate`) goes on without an event."""
        if self.state is not _READING:
            self._illegal(_READING)
        decoder = self._decoder
        deadline = self.read_deadline
        if not self._admitted:
            size = decoder.next_size()  # raises InvalidFrameSize for a bad prefix
            if size is not None:
                if not self._try_allocate(size):
                    # Waiting for the pool is the broker's doing, not the client's.
                    deadline.disarm()
                    self.state = _AWAITING_MEMORY
                    self._pending = size
                    return NeedMemory(size)
                self._admitted = True
                self._memory = size
        if self._admitted:
            frame = decoder.next_frame()
            if frame is not None:
                if deadline.expires_at is not None:
                    deadline.disarm()
                self._admitted = False
                return self._frame_received(frame, now)
        if decoder.in_frame:
            deadline.arm(now, self._read_timeout_s)
        size = decoder.read_size()
        return _READ_AHEAD if size == READ_AHEAD else NeedData(size)

    def grant_memory(self, now: float) -> ConnectionEvent:
        """The pool admitted the frame announced by `NeedMemory`."""
        if self.state is not _AWAITING_MEMORY:
            self._illegal(_AWAITING_MEMORY)
        self.state = _READING
        self._admitted = True
        self._memory = self._pending
        return self.next_event(now)

    def take_first_request(self, decoded: Decoded) -> None:
        """A first request decoded when the connection was screened (first_read), before
        this state existed, becomes the request in flight."""
        if self.state is not _READING:
            self._illegal(_READING)
        self._request_in_flight(decoded)

    def _request_in_flight(self, decoded: Decoded) -> None:
        header = decoded.header
        if header.api_key == API_VERSIONS_KEY and header.api_version >= 3:
            info = client_information(decoded)
            if info is not None:
                self._record_client_information(info)
        self.mute.mute()
        self.mute.handle_event(_REQUEST_RECEIVED)
        self.state = _RESPONDING

    def _frame_received(self, frame: Frame, now: float) -> ConnectionEvent:
        # The frame's memory stays the connection's (`held_memory`) until an event
        # hands it out: a frame that fails to decode is released by the close.
        sasl = self.sasl
        if sasl is not None and sasl.wants_raw_token:
            verdict = sasl.on_raw_token(bytes(frame), int(now * 1000))
            return self._sasl_answer(verdict, None)
        decoded = decode_frame(frame, self._is_enabled)
        if sasl is not None:
            header = decoded.header
            verdict = sasl.on_request(
                header.api_key, header.api_version, decoded.body, int(now * 1000)
            )
            if verdict.action is not Action.FORWARD:
                return self._sasl_answer(verdict, decoded)
        memory, self._memory = self._memory, 0
        self._request_in_flight(decoded)
        return RequestReceived(decoded, frame, memory)

    def _record_client_information(self, info: ClientInformation) -> None:
        self.client_information = info
        self.context = attrs.evolve(self.context, client_information=info)

    def _sasl_answer(self, verdict: Verdict, decoded: Decoded | None) -> SaslAnswer:
        assert self.sasl is not None
        memory, self._memory = self._memory, 0
        if verdict.action is Action.REPLY and verdict.event in (
            Event.AUTHENTICATED,
            Event.REAUTHENTICATED,
        ):
            self.context = attrs.evolve(self.context, principal=self.sasl.principal)
            self._decoder.max_size = self._normal_max_receive
        if self.sasl.state is State.FAILED:
            self.state = _CLOSED
        answer = sasl_answer(verdict, decoded) if verdict.action is not Action.CLOSE else []
        return SaslAnswer(verdict, answer, memory)

    # -- responses --------------------------------------------------------------------
    def send(self, response: Response) -> Outgoing:
        """A response (or throttle notice) for the request in flight: the bytes to write
        and whether to close. The connection reads again (READING) once the response is
        sent and no throttle holds it, as Kafka's mute table says."""
        if self.state is not _RESPONDING:
            self._illegal(_RESPONDING)
        mute = self.mute
        if isinstance(response, SendResponse):
            mute.handle_event(_RESPONSE_SENT)
            chunks = response.chunks
            outgoing = Outgoing(chunks if len(chunks) <= 1 else coalesce(chunks), True)
            if mute.maybe_unmute():
                self.state = _READING
            return outgoing
        kind = type(response)
        if kind is NoOpResponse:
            mute.handle_event(_RESPONSE_SENT)
            outgoing = _ANSWERED
        elif kind is CloseConnectionResponse:
            self.state = _CLOSED
            return _CLOSE
        elif kind is StartThrottlingResponse:
            mute.handle_event(_THROTTLE_STARTED)
            outgoing = _NOTHING
        elif kind is EndThrottlingResponse:
            mute.handle_event(_THROTTLE_ENDED)
            outgoing = _NOTHING
        else:
            raise IllegalConnectionState(f"unknown response {kind.__name__}")
        if mute.maybe_unmute():
            self.state = _READING
        return outgoing

    def authenticated_as(self, principal: str) -> None:
        """The principal a TLS client certificate maps to."""
        self.context = attrs.evolve(self.context, principal=principal)

    def touch(self, now: float) -> None:
        """Record activity (a response written); the idle reaper reads `last_active`."""
        self.last_active = now

    def _illegal(self, expected: ConnectionState) -> NoReturn:
        raise IllegalConnectionState(f"connection is {self.state.name}, not {expected.name}")
