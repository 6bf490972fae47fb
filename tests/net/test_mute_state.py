"""Kafka's channel mute state machine (spec §4.5), checked exhaustively."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker.net.mute_state import (
    ChannelMuteStateMachine,
    IllegalMuteTransition,
    MuteEvent,
    MuteState,
)

S, E = MuteState, MuteEvent

# The spec's transition table, written out independently of the implementation.
SPEC_TABLE = {
    (S.MUTED, E.REQUEST_RECEIVED): S.MUTED_AND_RESPONSE_PENDING,
    (S.MUTED_AND_RESPONSE_PENDING, E.THROTTLE_STARTED): S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING,
    (S.MUTED_AND_RESPONSE_PENDING, E.RESPONSE_SENT): S.MUTED,
    (S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING, E.RESPONSE_SENT): S.MUTED_AND_THROTTLED,
    (S.MUTED_AND_THROTTLED, E.THROTTLE_ENDED): S.MUTED,
    (S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING, E.THROTTLE_ENDED): S.MUTED_AND_RESPONSE_PENDING,
}


@pytest.mark.parametrize(("state", "event"), list(itertools.product(S, E)))
def test_every_state_event_pair_follows_the_spec_table(state: MuteState, event: MuteEvent) -> None:
    machine = ChannelMuteStateMachine(state)
    expected = SPEC_TABLE.get((state, event))
    if expected is None:
        with pytest.raises(IllegalMuteTransition):
            machine.handle_event(event)
        assert machine.state is state
    else:
        machine.handle_event(event)
        assert machine.state is expected


@pytest.mark.parametrize("state", list(S))
def test_mute_only_changes_an_unmuted_channel(state: MuteState) -> None:
    machine = ChannelMuteStateMachine(state)
    machine.mute()
    assert machine.state is (S.MUTED if state is S.NOT_MUTED else state)
    assert machine.is_muted


@pytest.mark.parametrize("state", list(S))
def test_unmute_succeeds_only_from_muted(state: MuteState) -> None:
    machine = ChannelMuteStateMachine(state)
    result = machine.maybe_unmute()
    if state in (S.MUTED, S.NOT_MUTED):
        assert result is True
        assert machine.state is S.NOT_MUTED
        assert not machine.is_muted
    else:
        assert result is False
        assert machine.state is state


def test_a_new_channel_is_not_muted() -> None:
    assert ChannelMuteStateMachine().state is S.NOT_MUTED


def test_a_throttled_request_cycle_returns_to_reading() -> None:
    machine = ChannelMuteStateMachine()
    machine.mute()
    machine.handle_event(E.REQUEST_RECEIVED)
    machine.handle_event(E.THROTTLE_STARTED)
    machine.handle_event(E.RESPONSE_SENT)
    assert not machine.maybe_unmute()
    machine.handle_event(E.THROTTLE_ENDED)
    assert machine.maybe_unmute()


class MuteMachineComparison(RuleBasedStateMachine):
    """Random call sequences against a reference model of the spec."""

    def __init__(self) -> None:
        super().__init__()
        self.machine = ChannelMuteStateMachine()
        self.model = S.NOT_MUTED
        self.requests_in_flight = 0

    @rule()
    def mute(self) -> None:
        self.machine.mute()
        if self.model is S.NOT_MUTED:
            self.model = S.MUTED

    @rule()
    def unmute(self) -> None:
        result = self.machine.maybe_unmute()
        if self.model is S.MUTED:
            self.model = S.NOT_MUTED
        assert result == (self.model is S.NOT_MUTED)

    @rule(event=st.sampled_from(list(E)))
    def event(self, event: MuteEvent) -> None:
        expected = SPEC_TABLE.get((self.model, event))
        if expected is None:
            try:
                self.machine.handle_event(event)
            except IllegalMuteTransition:
                return
            raise AssertionError(f"{event} accepted in {self.model}")
        self.machine.handle_event(event)
        if event is E.REQUEST_RECEIVED:
            self.requests_in_flight += 1
        if event is E.RESPONSE_SENT:
            self.requests_in_flight -= 1
        self.model = expected

    @invariant()
    def matches_model(self) -> None:
        assert self.machine.state is self.model
        assert self.machine.is_muted == (self.model is not S.NOT_MUTED)

    @invariant()
    def at_most_one_request_in_flight(self) -> None:
        assert self.requests_in_flight in (0, 1)
        pending = self.model in (
            S.MUTED_AND_RESPONSE_PENDING,
            S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING,
        )
        assert pending == (self.requests_in_flight == 1)


TestMuteMachineComparison = MuteMachineComparison.TestCase
