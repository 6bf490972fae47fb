"""Answers that wait on an ISR leave the request-handler task: the follower's Fetch that
ends the wait is served by the same task (with `num.io.threads` tasks all waiting, it
used to queue behind them until the ISR shrank: 3.9 s per transactional commit)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from broker.handlers.api_handler import Deferred, NoResponse
from broker.handlers.kafka_apis import KafkaApis, standard_middleware
from broker.handlers.middleware import build_chain
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.messages import MetadataRequest
from tests.handlers.request_factory import make_request
from tests.waiting import wait_until


class WaitsForFollowers:
    """OffsetCommit as it is where __consumer_offsets is replicated: answered once the
    followers have fetched the records."""

    api_key = ApiKey.OFFSET_COMMIT
    min_version = 0
    max_version = 9
    waits_on_replication = True

    def __init__(self, fetched: trio.Event) -> None:
        self.fetched = fetched
        self.calls = 0

    async def handle(self, request: Request) -> Any:
        self.calls += 1
        await self.fetched.wait()
        return NoResponse()

    def error_response(self, request: Request, error_code: int) -> Any:
        return None


class FollowerFetch:
    api_key = ApiKey.FETCH
    min_version = 0
    max_version = 17

    def __init__(self, fetched: trio.Event) -> None:
        self.fetched = fetched

    async def handle(self, request: Request) -> Any:
        self.fetched.set()
        return NoResponse()

    def error_response(self, request: Request, error_code: int) -> Any:
        return None


class SentResponses:
    def __init__(self) -> None:
        self.api_keys: list[int] = []

    def send_response(self, response: Any) -> None:
        self.api_keys.append(response.request.api_key)


def request(api_key: int) -> Request:
    return make_request(MetadataRequest(topics=()), api_key, 0)


async def test_the_one_handler_task_serves_the_fetch_that_a_deferred_commit_waits_for() -> None:
    fetched = trio.Event()
    apis = KafkaApis([WaitsForFollowers(fetched), FollowerFetch(fetched)])
    sent = SentResponses()
    async with trio.open_nursery() as nursery:
        await nursery.start(apis.run)
        with trio.fail_after(5):
            # One request-handler task: each handle() returns before the next is taken.
            await apis.handle(request(ApiKey.OFFSET_COMMIT), sent)  # type: ignore[arg-type]
            await trio.testing.wait_all_tasks_blocked()
            assert apis.deferred_waiting == 1  # the commit waits apart from the handler task
            await apis.handle(request(ApiKey.FETCH), sent)  # type: ignore[arg-type]
            await wait_until(lambda: len(sent.api_keys) == 2)
        nursery.cancel_scope.cancel()
    assert sent.api_keys == [ApiKey.FETCH, ApiKey.OFFSET_COMMIT]


async def test_only_handlers_that_wait_on_replication_are_deferred() -> None:
    fetched = trio.Event()
    waiting = WaitsForFollowers(fetched)
    deferred = await build_chain(waiting, standard_middleware())(request(ApiKey.OFFSET_COMMIT))
    assert isinstance(deferred, Deferred) and waiting.calls == 0  # nothing ran in the task
    fetch = await build_chain(FollowerFetch(fetched), standard_middleware())(request(ApiKey.FETCH))
    assert fetch == NoResponse()
    assert await deferred.wait() == NoResponse() and waiting.calls == 1


async def test_a_deferred_handler_that_defers_itself_is_answered_once() -> None:
    class DefersItself(WaitsForFollowers):
        async def handle(self, request: Request) -> Any:
            async def later() -> Any:
                return NoResponse()

            return Deferred(later)

    handler = DefersItself(trio.Event())
    deferred = await build_chain(handler, standard_middleware())(request(ApiKey.OFFSET_COMMIT))
    assert isinstance(deferred, Deferred)
    assert await deferred.wait() == NoResponse()
