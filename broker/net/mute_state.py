"""Kafka's channel mute state machine (KafkaChannel.ChannelMuteState, spec §4.5).

Muting is how Kafka keeps exactly one request in flight per connection: reads
stop once a request is queued and resume only after its response is written
and any quota throttle has ended. The rules are kept in one pure table so the
processor cannot drift from Kafka's ordering guarantees.
"""

from __future__ import annotations

import enum


class MuteState(enum.Enum):
    # Identity hashing in C: Enum's own __hash__ is a Python call, and every request
    # looks up (state, event) pairs twice.
    __hash__ = object.__hash__

    NOT_MUTED = "NOT_MUTED"
    MUTED = "MUTED"
    MUTED_AND_RESPONSE_PENDING = "MUTED_AND_RESPONSE_PENDING"
    MUTED_AND_THROTTLED = "MUTED_AND_THROTTLED"
    MUTED_AND_THROTTLED_AND_RESPONSE_PENDING = "MUTED_AND_THROTTLED_AND_RESPONSE_PENDING"


class MuteEvent(enum.Enum):
    __hash__ = object.__hash__

    REQUEST_RECEIVED = "REQUEST_RECEIVED"
    RESPONSE_SENT = "RESPONSE_SENT"
    THROTTLE_STARTED = "THROTTLE_STARTED"
    THROTTLE_ENDED = "THROTTLE_ENDED"


class IllegalMuteTransition(Exception):
    """An event arrived in a state where Kafka does not allow it; the caller
    closes the connection, as Kafka's processor does on IllegalStateException."""

    def __init__(self, state: MuteState, event: MuteEvent) -> None:
        super().__init__(f"cannot transition from {state.name} for {event.name}")
        self.state = state
        self.event = event


_S = MuteState
_E = MuteEvent

TRANSITIONS: dict[tuple[MuteState, MuteEvent], MuteState] = {
    (_S.MUTED, _E.REQUEST_RECEIVED): _S.MUTED_AND_RESPONSE_PENDING,
    (_S.MUTED_AND_RESPONSE_PENDING, _E.RESPONSE_SENT): _S.MUTED,
    (_S.MUTED_AND_RESPONSE_PENDING, _E.THROTTLE_STARTED): (
        _S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING
    ),
    (_S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING, _E.RESPONSE_SENT): _S.MUTED_AND_THROTTLED,
    (_S.MUTED_AND_THROTTLED, _E.THROTTLE_ENDED): _S.MUTED,
    (_S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING, _E.THROTTLE_ENDED): (
        _S.MUTED_AND_RESPONSE_PENDING
    ),
}
"""Every legal (state, event) pair and its target; anything else is illegal."""


# Read on every request: module constants, not enum attribute lookups (slow on 3.11).
_NOT_MUTED = MuteState.NOT_MUTED
_MUTED = MuteState.MUTED


class ChannelMuteStateMachine:
    """The mute state of one connection; starts NOT_MUTED."""

    __slots__ = ("_state",)

    def __init__(self, state: MuteState = MuteState.NOT_MUTED) -> None:
        self._state = state

    @property
    def state(self) -> MuteState:
        return self._state

    @property
    def is_muted(self) -> bool:
        return self._state is not _NOT_MUTED

    def mute(self) -> None:
        """Stop reading. Muting an already-muted channel keeps its richer state,
        which is what lets a memory-pool mute coexist with a pending response."""
        if self._state is _NOT_MUTED:
            self._state = _MUTED

    def handle_event(self, event: MuteEvent) -> None:
        target = TRANSITIONS.get((self._state, event))
        if target is None:
            raise IllegalMuteTransition(self._state, event)
        self._state = target

    def maybe_unmute(self) -> bool:
        """Resume reading if nothing (response, throttle) still holds the channel.
        Returns whether the channel is now unmuted."""
        if self._state is _MUTED:
            self._state = _NOT_MUTED
        return self._state is _NOT_MUTED

    def __repr__(self) -> str:
        return f"ChannelMuteStateMachine({self._state.name})"
