"""The console after a broker process restarted: its kept connection is dead. A read is
answered from a fresh connection at once; a change is not repeated (it may have been
applied before the connection went), and the next request reconnects."""

from __future__ import annotations

import json
from typing import Any, cast

import trio
from starlette.requests import Request

from broker.client.security_config import SecurityConfig
from broker.client.session import ClientError, ConnectionLost
from broker.console.console_api import ConsoleApi
from broker.console.console_session import ConsoleSession
from broker.console.logins import Logins
from broker.metrics_http import MetricsSource


class FakeSession:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


class CountingLogins(Logins):
    """No brokers: each connect is a new numbered session."""

    def __init__(self) -> None:
        super().__init__(lambda: "127.0.0.1:9", None)
        self.sessions: list[FakeSession] = []

    async def connect(self, security: SecurityConfig) -> ConsoleSession:
        self.sessions.append(FakeSession(len(self.sessions) + 1))
        return cast(ConsoleSession, self.sessions[-1])


def request(method: str) -> Request:
    return Request({"type": "http", "method": method, "path": "/api/x", "headers": []})


def dead_on_first_session(seen: list[int]) -> Any:
    """An action whose first session's connection is dead, as after a restart."""

    async def action(session: Any, _request: Request) -> Any:
        seen.append(session.number)
        if session.number == 1:
            raise trio.BrokenResourceError("the broker process restarted")
        return {"answered_by": session.number}

    return action


def api_with(logins: Logins) -> ConsoleApi:
    return ConsoleApi(logins, cast(MetricsSource, None))


async def test_a_read_after_the_connection_died_is_answered_from_a_fresh_one() -> None:
    logins = CountingLogins()
    seen: list[int] = []
    response = await api_with(logins)._act(request("GET"), dead_on_first_session(seen))
    assert response.status_code == 200
    assert json.loads(bytes(response.body)) == {"answered_by": 2}
    assert seen == [1, 2]
    assert logins.sessions[0].closed and not logins.sessions[1].closed


async def test_a_change_is_not_repeated_and_the_next_request_reconnects() -> None:
    logins = CountingLogins()
    api = api_with(logins)
    seen: list[int] = []
    action = dead_on_first_session(seen)
    failed = await api._act(request("POST"), action)
    assert failed.status_code == 400
    assert "lost the connection to the brokers" in json.loads(bytes(failed.body))["error"]
    assert seen == [1], "sent once"
    answered = await api._act(request("POST"), action)
    assert answered.status_code == 200 and seen == [1, 2]


async def test_a_session_that_stopped_answering_is_replaced_but_a_refusal_is_not() -> None:
    logins = CountingLogins()
    api = api_with(logins)
    seen: list[int] = []

    async def timed_out_then_refused(session: Any, _request: Request) -> Any:
        seen.append(session.number)
        if session.number == 1:
            raise ConnectionLost("Metadata v12: no answer within 10.0s")
        raise ClientError("UNKNOWN_TOPIC_OR_PARTITION: no such topic")

    refused = await api._act(request("GET"), timed_out_then_refused)
    assert refused.status_code == 400
    assert "UNKNOWN_TOPIC_OR_PARTITION" in json.loads(bytes(refused.body))["error"]
    assert seen == [1, 2], "the lost session replaced once, the refusal shown"
    assert logins.sessions[0].closed and not logins.sessions[1].closed
