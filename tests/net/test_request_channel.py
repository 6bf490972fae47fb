"""The request channel's Trio side over the request queue: back-pressure, wake-ups, and
handlers taking small requests first with few large ones in service."""

from __future__ import annotations

import trio
import trio.testing

from broker.net.request import Request
from broker.net.request_channel import RequestChannel
from broker.net.request_handler_pool import RequestHandlerPool
from broker.net.request_queue import SMALL_REQUEST_BYTES
from broker.protocol.messages import MetadataRequest
from tests.handlers.request_factory import make_request
from tests.waiting import wait_until

LARGE = SMALL_REQUEST_BYTES + 1


def request(name: str, size: int) -> Request:
    req = make_request(MetadataRequest(topics=None), 3, 12)
    req.size_bytes = size
    req.header = req.header._replace(client_id=name)
    return req


class RecordingApis:
    """Records the order requests start; large ones wait for their gate."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, trio.Event] = {}
        self.in_service = 0
        self.most_in_service = 0

    async def handle(self, request: Request, channel: RequestChannel) -> None:
        name = str(request.header.client_id)
        self.started.append(name)
        if name in self.gates:
            self.in_service += 1
            self.most_in_service = max(self.most_in_service, self.in_service)
            await self.gates[name].wait()
            self.in_service -= 1


async def test_a_full_channel_holds_the_sender_until_a_handler_takes_a_request() -> None:
    channel = RequestChannel(2)
    await channel.send_request(request("a", 10))
    await channel.send_request(request("b", 10))
    sent = trio.Event()

    async def third() -> None:
        await channel.send_request(request("c", 10))
        sent.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(third)
        await trio.testing.wait_all_tasks_blocked()
        assert not sent.is_set() and channel.request_queue_size() == 2
        assert channel.receive_request_nowait().header.client_id == "a"
        with trio.fail_after(5):
            await sent.wait()
    assert channel.request_queue_size() == 2


async def test_a_waiting_handler_wakes_for_a_request_sent_later() -> None:
    channel = RequestChannel(10)
    apis = RecordingApis()
    pool = RequestHandlerPool(channel, apis, 2)
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        await trio.testing.wait_all_tasks_blocked()
        await channel.send_request(request("late", 10))
        await wait_until(lambda: apis.started == ["late"], interval_s=0.001)
        nursery.cancel_scope.cancel()


async def test_handlers_take_small_requests_first_and_few_large_ones_at_once() -> None:
    channel = RequestChannel(100)
    apis = RecordingApis()
    pool = RequestHandlerPool(channel, apis, 4)  # a quarter of 4: one large in service
    large = [f"large-{i}" for i in range(3)]
    apis.gates = {name: trio.Event() for name in large}
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        for name in large:
            await channel.send_request(request(name, LARGE))
        for i in range(3):
            await channel.send_request(request(f"small-{i}", 100))
        await wait_until(lambda: len(apis.started) >= 4, interval_s=0.001)
        # One large request in service; the small ones did not wait for it.
        assert apis.started == ["small-0", "small-1", "small-2", "large-0"]
        await trio.testing.wait_all_tasks_blocked()
        assert len(apis.started) == 4
        for name in large:
            apis.gates[name].set()
            await trio.testing.wait_all_tasks_blocked()
        assert apis.started[4:] == ["large-1", "large-2"]
        assert apis.most_in_service == 1
        nursery.cancel_scope.cancel()


async def test_a_large_request_on_a_quiet_loop_may_do_its_bulk_work_on_the_loop() -> None:
    """Issue 19 item 7: with no small request to protect, a large request's turn is
    given at once and its batches may be written on the loop (Request.bulk_on_loop)."""
    channel = RequestChannel(10)
    taken: list[tuple[str, bool]] = []

    class Apis:
        async def handle(self, request: Request, channel: RequestChannel) -> None:
            taken.append((str(request.header.client_id), request.bulk_on_loop))

    pool = RequestHandlerPool(channel, Apis(), 1)
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        await channel.send_request(request("quiet", LARGE))
        await wait_until(lambda: len(taken) == 1, interval_s=0.001)
        channel.bulk_turns.small_requests += 1  # as a connection task counts one
        await channel.send_request(request("busy", LARGE))
        await wait_until(lambda: len(taken) == 2, interval_s=0.001)
        nursery.cancel_scope.cancel()
    assert taken == [("quiet", True), ("busy", False)]
