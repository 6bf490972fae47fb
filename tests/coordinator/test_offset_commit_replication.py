"""OffsetCommit on a replicated `__consumer_offsets` is answered once the append is
replicated, but outside the request handler: the handler returns a Deferred at once.

Found by the network cut-off fault test (tests/hosts/test_faults.py): with both request
handlers (`num.io.threads=2`) waiting in commits, the followers' Fetch requests that
would replicate the commits queued behind them, and every commit waited until the
leader shrank its ISR."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio

from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import CoordinatorConfig
from broker.coordinator.group_metadata_partition import KeyedRecord
from broker.handlers.api_handler import Deferred
from broker.handlers.offset_handlers import OffsetCommitHandler
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import OffsetCommitResponse
from tests.coordinator.test_group_authorization import commit_body
from tests.coordinator.test_replicated_offset_store import FakePartition
from tests.handlers.request_factory import make_request


class HeldPartition(FakePartition):
    """Appends wait until `replicated` is set (the followers have fetched them)."""

    def __init__(self) -> None:
        super().__init__([])
        self.replicated = trio.Event()

    async def append(self, records: Sequence[KeyedRecord]) -> ErrorCode:
        await self.replicated.wait()
        return await super().append(records)


async def test_a_commit_waiting_for_replication_leaves_the_handler_at_once(
    tmp_path: Path,
) -> None:
    partition = HeldPartition()
    service = GroupCoordinatorService(CoordinatorConfig(), tmp_path, partition=partition)
    handler = OffsetCommitHandler(service)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        partition.leadership.value = 1
        with trio.fail_after(5):
            while service.fetch_offsets("g", None)[0] is not ErrorCode.NONE:  # noqa: ASYNC110 - loading has no event of its own
                await trio.sleep(0.01)
            outcome = await handler.handle(make_request(commit_body("g", "t"), 8, 9))
            assert isinstance(outcome, Deferred)
            answered: list[OffsetCommitResponse] = []

            async def answer() -> None:
                response = await outcome.wait()
                assert isinstance(response, OffsetCommitResponse)
                answered.append(response)

            nursery.start_soon(answer)
            await trio.sleep(0.05)
            assert answered == [], "answered before the append was replicated"
            assert partition.records == []
            partition.replicated.set()
            while not answered:  # noqa: ASYNC110 - the deferred answer is what is awaited
                await trio.sleep(0.01)
        (response,) = answered
        assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.NONE]
        assert len(partition.records) == 1
        nursery.cancel_scope.cancel()
