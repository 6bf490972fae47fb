"""How KafkaApis (its ClientQuotas middleware) applies client-quota throttles to what it sends (KIP-219), with a real
request channel and Trio's autojump clock instead of a network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from broker.handlers.api_handler import NoResponse
from broker.handlers.kafka_apis import KafkaApis
from broker.handlers.middleware.client_quotas import ClientQuotas
from broker.net.request import (
    EndThrottlingResponse,
    NoOpResponse,
    Request,
    Response,
    SendResponse,
    StartThrottlingResponse,
)
from broker.net.request_channel import RequestChannel
from broker.protocol.messages import MetadataRequest, MetadataResponse
from tests.handlers.request_factory import make_request


class Handler:
    api_key = 3
    min_version = 0
    max_version = 12

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    async def handle(self, request: Request) -> Any:
        return self.outcome

    def error_response(self, request: Request, error_code: int) -> Any:
        return None


class Hooks:
    def __init__(self, throttle_ms: int, fail: bool = False) -> None:
        self.throttle_ms = throttle_ms
        self.fail = fail

    def before_handle(self, request: Request) -> None:
        pass

    def on_response(
        self, request: Request, outcome: Any, response_size: Callable[[Any], int]
    ) -> tuple[Any, int]:
        if self.fail:
            raise RuntimeError("bug in quota accounting")
        if hasattr(outcome, "throttle_time_ms"):
            outcome = outcome._replace(throttle_time_ms=self.throttle_ms)
        return outcome, self.throttle_ms

    def on_sent(self, request: Request) -> Callable[[], None] | None:
        return None


async def answer(outcome: Any, hooks: Hooks) -> list[tuple[float, Response]]:
    """What the processor is handed for one request, with when (autojump clock)."""
    channel = RequestChannel(10)
    delivered: list[tuple[float, Response]] = []
    channel.add_processor(0, lambda r: delivered.append((trio.current_time(), r)), lambda: 0)
    apis = KafkaApis([Handler(outcome)])
    apis.use(ClientQuotas(hooks))
    async with trio.open_nursery() as nursery:
        await nursery.start(channel.run_timers)
        await nursery.start(apis.run)
        start = trio.current_time()
        await apis.handle(make_request(MetadataRequest(topics=()), 3, 12), channel)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    return [(at - start, response) for at, response in delivered]


async def test_the_response_goes_out_at_once_between_start_and_end_of_throttling(
    autojump_clock: trio.abc.Clock,
) -> None:
    delivered = await answer(MetadataResponse(), Hooks(1500))
    kinds = [type(r) for _, r in delivered]
    assert kinds == [StartThrottlingResponse, SendResponse, EndThrottlingResponse]
    assert delivered[1][0] == 0 and delivered[2][0] >= 1.5
    send = delivered[1][1]
    assert isinstance(send, SendResponse) and send.log_body.throttle_time_ms == 1500


async def test_an_acks_zero_produce_is_throttled_without_a_response(
    autojump_clock: trio.abc.Clock,
) -> None:
    delivered = await answer(NoResponse(), Hooks(200))
    kinds = [type(r) for _, r in delivered]
    assert kinds == [StartThrottlingResponse, NoOpResponse, EndThrottlingResponse]


async def test_a_failing_quota_hook_still_answers_unthrottled(
    autojump_clock: trio.abc.Clock,
) -> None:
    delivered = await answer(MetadataResponse(), Hooks(1500, fail=True))
    assert [type(r) for _, r in delivered] == [SendResponse]
