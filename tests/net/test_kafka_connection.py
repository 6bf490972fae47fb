"""The sans-IO connection: every state against every call, and whole conversations.

No network and no Trio: bytes in, events out, responses in, bytes out, with `now`
passed explicitly.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.net.authenticator import Action, SaslAuthenticator, SaslSettings
from broker.net.kafka_connection import (
    COALESCE_LIMIT,
    ConnectionEvent,
    ConnectionState,
    EndOfStream,
    IllegalConnectionState,
    KafkaConnection,
    NeedData,
    NeedMemory,
    RequestReceived,
    SaslAnswer,
    coalesce,
)
from broker.net.mute_state import IllegalMuteTransition
from broker.net.request import (
    ClientInformation,
    CloseConnectionResponse,
    EndThrottlingResponse,
    NoOpResponse,
    Request,
    RequestContext,
    Response,
    SendResponse,
    StartThrottlingResponse,
)
from broker.net.request_decoding import UnsupportedApi, decode_frame
from broker.protocol.api import RequestHeader, decode_response, encode_request
from broker.protocol.errors import DecodeError
from broker.protocol.framing import FrameDecoder, InvalidFrameSize
from broker.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from broker.security.sasl_server import PlainSaslServer

MAX = 1 << 20
API_VERSIONS, METADATA = 18, 3


def enabled(api_key: int, version: int) -> bool:
    return (api_key, version) in {(18, 0), (18, 3), (3, 4), (3, 9), (17, 0), (17, 1), (36, 2)}


def context() -> RequestContext:
    return RequestContext(
        connection_id="c-1",
        processor_id=0,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        client_address="127.0.0.1",
        client_port=5000,
        client_information=ClientInformation(),
    )


def frame(body: Any, api_key: int, version: int, correlation_id: int = 1) -> bytes:
    header = RequestHeader(
        api_key=api_key, api_version=version, correlation_id=correlation_id, client_id="t"
    )
    wire = b"".join(bytes(c) for c in encode_request(header, body))
    return struct.pack(">i", len(wire) - 4) + wire[4:]


def api_versions(correlation_id: int = 1, name: str = "my-client") -> bytes:
    body = ApiVersionsRequest(client_software_name=name, client_software_version="1.0")
    return frame(body, API_VERSIONS, 3, correlation_id)


def metadata(correlation_id: int, topics: int = 0) -> bytes:
    body = MetadataRequest(topics=None if topics == 0 else ())
    return frame(body, METADATA, 9, correlation_id)


def sasl_settings(reauth_ms: int = 0) -> SaslSettings:
    return SaslSettings(
        ("PLAIN",), lambda _: PlainSaslServer({"alice": "pw"}), {"PLAIN": reauth_ms}
    )


def new_connection(
    sasl: SaslAuthenticator | None = None, sasl_max_receive: int | None = None, timeout: float = 0
) -> KafkaConnection:
    return KafkaConnection(
        context(),
        FrameDecoder(MAX),
        enabled,
        0.0,
        read_timeout_s=timeout,
        sasl=sasl,
        sasl_max_receive=sasl_max_receive,
    )


def deliver(connection: KafkaConnection, data: bytes, now: float = 0.0) -> ConnectionEvent:
    """Feed bytes and grant memory when asked, until the connection wants more or has
    something else to say."""
    event = connection.receive_data(data, now)
    while isinstance(event, NeedMemory):
        event = connection.grant_memory(now)
    return event


def expires(connection: KafkaConnection) -> float | None:
    """The read deadline (a call, so that type checkers do not narrow it between steps)."""
    return connection.read_deadline.expires_at


def state(connection: KafkaConnection) -> ConnectionState:
    return connection.state


def request_of(event: ConnectionEvent) -> Request:
    assert isinstance(event, RequestReceived)
    decoded = event.decoded
    return Request(
        header=decoded.header, body=decoded.body, context=context(), size_bytes=len(event.frame)
    )


# -- every state against every call ------------------------------------------------------
def in_state(state: ConnectionState) -> KafkaConnection:
    connection = new_connection()
    if state is ConnectionState.READING:
        return connection
    event = connection.receive_data(api_versions(), 0.0)
    if state is ConnectionState.AWAITING_MEMORY:
        assert isinstance(event, NeedMemory)
        return connection
    event = connection.grant_memory(0.0)
    if state is ConnectionState.RESPONDING:
        return connection
    connection.send(CloseConnectionResponse(request_of(event)))
    assert connection.state is ConnectionState.CLOSED
    return connection


def a_response() -> Response:
    return NoOpResponse(request_of(deliver(new_connection(), api_versions())))


CALLS: dict[str, tuple[Callable[[KafkaConnection], object], ConnectionState]] = {
    "receive_data": (lambda c: c.receive_data(b"\0", 0.0), ConnectionState.READING),
    "received_into": (lambda c: c.received_into(0, 0.0), ConnectionState.READING),
    "next_event": (lambda c: c.next_event(0.0), ConnectionState.READING),
    "grant_memory": (lambda c: c.grant_memory(0.0), ConnectionState.AWAITING_MEMORY),
    "send": (lambda c: c.send(a_response()), ConnectionState.RESPONDING),
    "take_first_request": (
        lambda c: c.take_first_request(decode_frame(api_versions()[4:], enabled)),
        ConnectionState.READING,
    ),
}


@pytest.mark.parametrize("state", list(ConnectionState))
@pytest.mark.parametrize("call", list(CALLS))
def test_each_call_is_accepted_only_in_its_state(state: ConnectionState, call: str) -> None:
    connection = in_state(state)
    do, allowed = CALLS[call]
    if state is allowed:
        do(connection)
    else:
        with pytest.raises(IllegalConnectionState):
            do(connection)
        assert connection.state is state


# -- reading -----------------------------------------------------------------------------
def test_a_request_needs_its_memory_before_it_is_handed_out() -> None:
    connection = new_connection()
    wire = api_versions()
    event = connection.receive_data(wire, 1.0)
    assert event == NeedMemory(len(wire) - 4)
    assert connection.held_memory == 0  # not admitted yet: nothing to release
    event = connection.grant_memory(1.0)
    assert isinstance(event, RequestReceived)
    assert event.memory == len(wire) - 4
    assert connection.held_memory == 0  # handed out with the event
    assert connection.state is ConnectionState.RESPONDING
    assert connection.mute.is_muted


def test_pipelined_requests_come_out_one_at_a_time_in_order() -> None:
    connection = new_connection()
    event = deliver(connection, metadata(1) + metadata(2) + metadata(3))
    seen = []
    while isinstance(event, RequestReceived):
        seen.append(event.decoded.header.correlation_id)
        connection.send(NoOpResponse(request_of(event)))
        event = connection.next_event(0.0)
        while isinstance(event, NeedMemory):
            event = connection.grant_memory(0.0)
    assert seen == [1, 2, 3]
    assert isinstance(event, NeedData)


def test_end_of_stream_is_an_event() -> None:
    assert isinstance(new_connection().receive_data(b"", 0.0), EndOfStream)
    assert isinstance(new_connection().received_into(0, 0.0), EndOfStream)


def test_a_bad_size_prefix_is_rejected_before_any_memory() -> None:
    connection = new_connection()
    with pytest.raises(InvalidFrameSize):
        connection.receive_data(struct.pack(">i", MAX + 1), 0.0)
    assert connection.held_memory == 0


def test_an_undecodable_frame_keeps_its_memory_for_the_close() -> None:
    connection = new_connection()
    connection.receive_data(struct.pack(">i", 6) + b"\xff" * 6, 0.0)
    with pytest.raises(DecodeError):
        connection.grant_memory(0.0)
    assert connection.held_memory == 6


def test_an_unsupported_api_closes_but_api_versions_is_answered_with_v0() -> None:
    with pytest.raises(UnsupportedApi):
        deliver(new_connection(), frame(MetadataRequest(topics=None), METADATA, 1))
    event = deliver(new_connection(), frame(ApiVersionsRequest(), API_VERSIONS, 1))
    assert isinstance(event, RequestReceived)
    assert event.decoded.unsupported and event.decoded.body is None


def test_api_versions_v3_records_valid_client_software_only() -> None:
    connection = new_connection()
    event = deliver(connection, api_versions(name="bad name!"))
    assert connection.client_information == ClientInformation()
    connection.send(NoOpResponse(request_of(event)))
    deliver(connection, api_versions(2))
    assert connection.client_information == ClientInformation("my-client", "1.0")
    assert connection.context.client_information == ClientInformation("my-client", "1.0")


def test_the_read_deadline_runs_only_while_a_frame_is_received() -> None:
    connection = new_connection(timeout=2.0)
    wire = metadata(1)
    assert expires(connection) is None
    event = connection.receive_data(wire[:2], 5.0)
    assert isinstance(event, NeedData)
    assert expires(connection) == 7.0
    event = connection.receive_data(wire[2:6], 6.0)
    assert isinstance(event, NeedMemory)
    assert expires(connection) is None  # the pool's wait is not the client's
    event = connection.grant_memory(9.0)
    assert isinstance(event, NeedData)
    assert expires(connection) == 11.0
    event = connection.receive_data(wire[6:], 10.0)
    assert isinstance(event, RequestReceived)
    assert expires(connection) is None
    assert connection.last_active == 10.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.booleans(), min_size=1, max_size=5),
    st.integers(min_value=256, max_value=200_000),
    st.booleans(),
)
def test_any_split_and_either_read_path_yield_the_same_requests(
    all_topics: list[bool], chunk: int, into: bool
) -> None:
    """Bytes fed as read, or read into the frame's own buffer (`frame_space`), in any
    split: the same requests come out, in order, and nothing is read past a frame."""
    bodies = [MetadataRequest(topics=None if every else ()) for every in all_topics]
    wire = b"".join(frame(body, METADATA, 9, index) for index, body in enumerate(bodies))
    wire += frame(ApiVersionsRequest(client_software_name="x" * 70_000), API_VERSIONS, 3, 99)
    connection = new_connection()
    position = 0
    seen: list[int] = []
    event: ConnectionEvent = connection.next_event(0.0)
    while len(seen) < len(bodies) + 1:
        if isinstance(event, NeedMemory):
            event = connection.grant_memory(0.0)
        elif isinstance(event, RequestReceived):
            seen.append(event.decoded.header.correlation_id)
            connection.send(NoOpResponse(request_of(event)))
            event = connection.next_event(0.0)
        else:
            assert isinstance(event, NeedData)
            space = connection.frame_space(chunk) if into else None
            if space is not None:
                count = min(len(space), len(wire) - position)
                space[:count] = wire[position : position + count]
                del space
                position += count
                event = connection.received_into(count, 0.0)
            else:
                data = wire[position : position + min(event.max_bytes, chunk)]
                assert data, "asked for bytes past the last frame"
                position += len(data)
                event = connection.receive_data(data, 0.0)
    assert seen == [*range(len(bodies)), 99]
    assert position == len(wire)


# -- responses ---------------------------------------------------------------------------
def responding() -> tuple[KafkaConnection, Request]:
    connection = new_connection()
    return connection, request_of(deliver(connection, api_versions()))


def test_a_response_is_written_and_reading_resumes() -> None:
    connection, request = responding()
    outgoing = connection.send(SendResponse(request, [b"abc", b"def"]))
    assert outgoing.answers and not outgoing.close
    assert b"".join(bytes(c) for c in outgoing.chunks) == b"abcdef"
    assert connection.state is ConnectionState.READING
    assert not connection.mute.is_muted


def test_a_throttled_connection_reads_again_only_once_the_throttle_ends() -> None:
    connection, request = responding()
    assert not connection.send(StartThrottlingResponse(request)).answers
    connection.send(SendResponse(request, [b"x"]))
    assert state(connection) is ConnectionState.RESPONDING
    connection.send(EndThrottlingResponse(request))
    assert state(connection) is ConnectionState.READING


def test_a_close_response_closes() -> None:
    connection, request = responding()
    outgoing = connection.send(CloseConnectionResponse(request))
    assert outgoing.close
    assert connection.state is ConnectionState.CLOSED


def test_a_second_answer_breaks_the_mute_table() -> None:
    connection, request = responding()
    connection.send(StartThrottlingResponse(request))
    connection.send(NoOpResponse(request))
    with pytest.raises(IllegalMuteTransition):
        connection.send(NoOpResponse(request))


@given(st.lists(st.integers(min_value=0, max_value=2 * COALESCE_LIMIT), max_size=8))
def test_coalescing_keeps_the_bytes_and_never_copies_a_large_chunk(sizes: list[int]) -> None:
    chunks = [bytes([i % 256]) * size for i, size in enumerate(sizes)]
    out = coalesce(chunks)
    assert b"".join(bytes(c) for c in out) == b"".join(chunks)
    large = [c for c in chunks if len(c) >= COALESCE_LIMIT]
    assert [c for c in out if any(c is big for big in large)] == large
    small_runs = [c for c in out if not any(c is big for big in large)]
    assert len(small_runs) <= len(large) + 1


# -- SASL --------------------------------------------------------------------------------
def sasl_connection(reauth_ms: int = 0, max_receive: int | None = None) -> KafkaConnection:
    return new_connection(SaslAuthenticator(sasl_settings(reauth_ms)), max_receive)


def handshake(connection: KafkaConnection, version: int = 1) -> SaslAnswer:
    event = deliver(connection, frame(SaslHandshakeRequest(mechanism="PLAIN"), 17, version))
    assert isinstance(event, SaslAnswer)
    return event


def authenticate(connection: KafkaConnection, token: bytes, now: float = 0.0) -> SaslAnswer:
    event = deliver(connection, frame(SaslAuthenticateRequest(auth_bytes=token), 36, 2), now)
    assert isinstance(event, SaslAnswer)
    return event


def test_a_sasl_login_sets_the_principal_and_lifts_the_receive_limit() -> None:
    connection = sasl_connection(max_receive=512)
    assert connection.max_receive == 512
    answer = handshake(connection)
    assert answer.verdict.action is Action.REPLY and answer.answer and answer.memory > 0
    answer = authenticate(connection, b"\0alice\0pw")
    assert answer.verdict.action is Action.REPLY
    correlation, body = decode_response(36, 2, b"".join(bytes(c) for c in answer.answer)[4:])
    assert correlation == 1 and body.error_code == 0
    assert connection.context.principal == "User:alice"
    assert connection.max_receive == MAX
    assert isinstance(deliver(connection, metadata(5)), RequestReceived)


def test_requests_before_a_sasl_login_are_not_forwarded_and_a_wrong_password_closes() -> None:
    connection = sasl_connection()
    assert isinstance(deliver(connection, api_versions()), RequestReceived)  # allowed first
    connection.send(NoOpResponse(a_response().request))
    assert deliver(connection, metadata(2)).verdict.action is not Action.FORWARD  # type: ignore[union-attr]
    assert connection.state is ConnectionState.CLOSED


def test_a_failed_login_closes_the_connection() -> None:
    connection = sasl_connection()
    handshake(connection)
    answer = authenticate(connection, b"\0alice\0wrong")
    assert answer.verdict.action is Action.FAIL
    assert answer.answer  # the error response, sent after the delay
    assert connection.state is ConnectionState.CLOSED


def test_the_v0_flow_reads_a_raw_token_after_the_handshake() -> None:
    connection = sasl_connection()
    handshake(connection, version=0)
    token = b"\0alice\0pw"
    event = deliver(connection, struct.pack(">i", len(token)) + token)
    assert isinstance(event, SaslAnswer)
    assert event.verdict.action is Action.REPLY
    assert connection.context.principal == "User:alice"


def test_a_session_used_past_its_lifetime_is_closed_on_its_next_request() -> None:
    connection = sasl_connection(reauth_ms=200)
    handshake(connection)
    authenticate(connection, b"\0alice\0pw", now=1.0)
    assert isinstance(deliver(connection, metadata(3), 1.1), RequestReceived)
    connection.send(NoOpResponse(a_response().request))
    event = deliver(connection, metadata(4), 1.3)
    assert isinstance(event, SaslAnswer)
    assert event.verdict.action is Action.CLOSE and not event.answer
    assert connection.state is ConnectionState.CLOSED


# -- a whole conversation, as hypothesis drives it --------------------------------------
class Conversation(RuleBasedStateMachine):
    """A client pipelines requests in arbitrary pieces; the pool admits late or at once;
    the API layer answers with throttles in any legal order. Invariants: requests come out
    in order, one at a time, and reading resumes exactly when the mute table allows."""

    def __init__(self) -> None:
        super().__init__()
        self.connection = new_connection(timeout=1.0)
        self.wire = b"".join(metadata(i) for i in range(6))
        self.position = 0
        self.now = 0.0
        self.event: ConnectionEvent = self.connection.next_event(self.now)
        self.received: list[int] = []
        self.request: Request | None = None
        self.answered = False
        self.throttled = False

    @precondition(lambda self: isinstance(self.event, NeedData) and self.position < len(self.wire))
    @rule(size=st.integers(min_value=1, max_value=300), pause=st.floats(0, 0.5))
    def client_sends(self, size: int, pause: float) -> None:
        assert isinstance(self.event, NeedData)
        self.now += pause
        data = self.wire[self.position : self.position + min(size, self.event.max_bytes)]
        self.position += len(data)
        self.event = self.connection.receive_data(data, self.now)
        self.take()

    @precondition(lambda self: isinstance(self.event, NeedMemory))
    @rule()
    def pool_admits(self) -> None:
        self.event = self.connection.grant_memory(self.now)
        self.take()

    @rule(pause=st.floats(0, 2))
    def time_passes(self, pause: float) -> None:
        self.now += pause

    def take(self) -> None:
        if isinstance(self.event, RequestReceived):
            self.received.append(self.event.decoded.header.correlation_id)
            self.request = request_of(self.event)
            self.answered = self.throttled = False

    @precondition(lambda self: self.request is not None and not self.answered)
    @rule(noop=st.booleans())
    def api_answers(self, noop: bool) -> None:
        assert self.request is not None
        response = NoOpResponse(self.request) if noop else SendResponse(self.request, [b"r"])
        self.connection.send(response)
        self.answered = True
        self.maybe_done()

    @precondition(
        lambda self: self.request is not None and not self.throttled and not self.answered
    )
    @rule()
    def throttle_starts(self) -> None:
        assert self.request is not None
        self.connection.send(StartThrottlingResponse(self.request))
        self.throttled = True

    @precondition(lambda self: self.request is not None and self.throttled)
    @rule()
    def throttle_ends(self) -> None:
        assert self.request is not None
        self.connection.send(EndThrottlingResponse(self.request))
        self.throttled = False
        self.maybe_done()

    def maybe_done(self) -> None:
        if self.answered and not self.throttled:
            assert self.connection.state is ConnectionState.READING
            self.request = None
            self.event = self.connection.next_event(self.now)
            self.take()

    @invariant()
    def one_request_in_flight_in_order(self) -> None:
        assert self.received == list(range(len(self.received)))
        responding = self.connection.state is ConnectionState.RESPONDING
        assert responding == self.connection.mute.is_muted
        if self.request is not None and self.connection.state is not ConnectionState.CLOSED:
            assert responding

    @invariant()
    def a_deadline_only_while_a_frame_is_incomplete(self) -> None:
        expires = self.connection.read_deadline.expires_at
        if not isinstance(self.event, NeedData):
            assert expires is None
        elif expires is not None:
            assert expires <= self.now + 1.0


TestConversation = Conversation.TestCase
TestConversation.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
