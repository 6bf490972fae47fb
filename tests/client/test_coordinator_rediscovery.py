"""`RoutingSession` sends a group's requests to the coordinator it found once; when an
answer says that coordinator moved or is not serving (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) it forgets it, asks
FindCoordinator again and resends, a bounded number of times, as Kafka's clients do.

The brokers are fakes answering decoded messages (unit tests of the routing), and once a
real two-process cluster whose coordinator the session first finds in the wrong place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from broker.client.routing_session import (
    COORDINATOR_ATTEMPTS,
    RoutingSession,
    find_coordinator,
    names_coordinator_error,
    open_peer,
)
from broker.client.security_config import SecurityConfig
from broker.client.session import ClientSession
from broker.protocol.api import SUPPORTED_VERSIONS
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchRequest,
)
from broker.protocol.messages.describe_groups_response import DescribedGroup
from broker.protocol.messages.find_coordinator_response import Coordinator
from broker.protocol.messages.metadata_response import MetadataResponseBroker
from broker.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from tests.integration.broker_harness import start_broker_process, stop_broker_process

BROKERS = {1: ("broker-1", 9001), 2: ("broker-2", 9002)}
# FindCoordinator v3: one key per request, the answer at the top level.
VERSIONS = {**SUPPORTED_VERSIONS, 10: (0, 3)}


class FakeBroker:
    """A connection to one broker: every request recorded, each answered by `answer`."""

    def __init__(self, answers: dict[int, list[Any]]) -> None:
        self.answers = answers
        self.asked: list[Any] = []

    async def request(self, body: Any, version: int) -> Any:
        self.asked.append(body)
        queue = self.answers[int(body.API_KEY)]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    async def aclose(self) -> None:
        pass


def coordinator_is(node: int) -> FindCoordinatorResponse:
    host, port = BROKERS[node]
    return FindCoordinatorResponse(node_id=node, host=host, port=port)


def cluster_session(
    bootstrap: FakeBroker, peers: dict[str, FakeBroker]
) -> tuple[RoutingSession, list[str]]:
    """A session bootstrapped at `bootstrap`; the addresses of the peers it opened."""
    opened: list[str] = []

    async def open_peer(address: str, timeout_s: float, security: SecurityConfig) -> ClientSession:
        opened.append(address)
        return ClientSession(peers[address], VERSIONS)  # type: ignore[arg-type]

    session = RoutingSession(bootstrap, VERSIONS, peer_opener=open_peer)
    return session, opened


def bootstrap_finding(*coordinators: int) -> FakeBroker:
    metadata = MetadataResponse(
        brokers=tuple(
            MetadataResponseBroker(node_id=n, host=h, port=p) for n, (h, p) in BROKERS.items()
        )
    )
    return FakeBroker({3: [metadata], 10: [coordinator_is(n) for n in coordinators]})


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ],
)
async def test_a_coordinator_error_makes_the_session_find_the_coordinator_again(
    error: ErrorCode, autojump_clock: trio.testing.MockClock
) -> None:
    bootstrap = bootstrap_finding(1, 2)  # the group moved from broker 1 to broker 2
    moved_from = FakeBroker({12: [HeartbeatResponse(error_code=error)]})
    moved_to = FakeBroker({12: [HeartbeatResponse(error_code=ErrorCode.NONE)]})
    session, opened = cluster_session(
        bootstrap, {"broker-1:9001": moved_from, "broker-2:9002": moved_to}
    )

    answer = await session.request(HeartbeatRequest(group_id="g"), 4)

    assert answer.error_code == ErrorCode.NONE
    assert [type(body).__name__ for body in bootstrap.asked].count("FindCoordinatorRequest") == 2
    assert (len(moved_from.asked), len(moved_to.asked)) == (1, 1)
    assert opened == ["broker-1:9001", "broker-2:9002"]
    # Found again, the coordinator is remembered: no third lookup.
    await session.request(HeartbeatRequest(group_id="g"), 4)
    assert len(moved_to.asked) == 2
    assert [type(body).__name__ for body in bootstrap.asked].count("FindCoordinatorRequest") == 2


async def test_a_coordinator_that_never_answers_gives_its_last_error_after_bounded_tries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bootstrap = bootstrap_finding(1)
    loading = FakeBroker(
        {12: [HeartbeatResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]}
    )
    session, _ = cluster_session(bootstrap, {"broker-1:9001": loading})

    answer = await session.request(HeartbeatRequest(group_id="g"), 4)

    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert len(loading.asked) == COORDINATOR_ATTEMPTS
    lookups = [type(body).__name__ for body in bootstrap.asked].count("FindCoordinatorRequest")
    assert lookups == COORDINATOR_ATTEMPTS


async def test_describe_groups_finds_a_moved_groups_coordinator_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bootstrap = bootstrap_finding(1, 2)
    moved = DescribedGroup(group_id="g", error_code=ErrorCode.NOT_COORDINATOR)
    stable = DescribedGroup(group_id="g", group_state="Stable")
    moved_from = FakeBroker({15: [DescribeGroupsResponse(groups=(moved,))]})
    moved_to = FakeBroker({15: [DescribeGroupsResponse(groups=(stable,))]})
    session, _ = cluster_session(
        bootstrap, {"broker-1:9001": moved_from, "broker-2:9002": moved_to}
    )

    answer = await session.request(DescribeGroupsRequest(groups=("g",)), 5)

    assert answer.groups == (stable,)


def test_offset_commit_names_a_coordinator_error_only_per_partition() -> None:
    def commit_answer(code: int) -> OffsetCommitResponse:
        partition = OffsetCommitResponsePartition(partition_index=0, error_code=code)
        return OffsetCommitResponse(
            topics=(OffsetCommitResponseTopic(name="t", partitions=(partition,)),)
        )

    assert names_coordinator_error(commit_answer(ErrorCode.NOT_COORDINATOR))
    assert not names_coordinator_error(commit_answer(ErrorCode.OFFSET_METADATA_TOO_LARGE))


@attrs.define
class MovedCoordinator:
    """A real connection whose first FindCoordinator answer names `stale` instead: the
    coordinator as a client remembers it from before it moved."""

    connection: Any
    stale: tuple[int, str, int]
    moved: bool = False

    async def request(self, body: Any, version: int) -> Any:
        answer = await self.connection.request(body, version)
        if int(body.API_KEY) != 10 or self.moved:
            return answer
        self.moved = True
        node, host, port = self.stale
        if answer.coordinators:
            wrong = Coordinator(key=answer.coordinators[0].key, node_id=node, host=host, port=port)
            return answer._replace(coordinators=(wrong,))
        return answer._replace(node_id=node, host=host, port=port)

    async def aclose(self) -> None:
        await self.connection.aclose()


@attrs.define
class Recording:
    """A real connection, each answer kept."""

    connection: Any
    answers: list[Any]

    async def request(self, body: Any, version: int) -> Any:
        answer = await self.connection.request(body, version)
        self.answers.append(answer)
        return answer

    async def aclose(self) -> None:
        await self.connection.aclose()


async def group_coordinated_elsewhere(session: RoutingSession, node: int) -> str:
    for i in range(100):
        if (await find_coordinator(session, f"moved-{i}")).node_id != node:
            return f"moved-{i}"
    raise AssertionError(f"every group is coordinated by node {node}")


async def test_a_real_cluster_sends_the_session_to_the_groups_new_coordinator(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", {"process.count": "2"})
    try:
        nodes = cluster.node_ports()
        bootstrap_node = min(nodes)
        bootstrap = f"127.0.0.1:{nodes[bootstrap_node]}"
        real = await RoutingSession.open(bootstrap)
        group = await group_coordinated_elsewhere(real, bootstrap_node)
        answers: list[Any] = []

        async def recording_peer(
            address: str, timeout_s: float, security: SecurityConfig
        ) -> ClientSession:
            peer = await open_peer(address, timeout_s, security)
            return ClientSession(Recording(peer.connection, answers), peer.broker_versions)  # type: ignore[arg-type]

        stale = (bootstrap_node, "127.0.0.1", nodes[bootstrap_node])
        session = RoutingSession(
            MovedCoordinator(real.connection, stale),
            real.broker_versions,
            peer_opener=recording_peer,
        )
        await session.brokers()
        version = session.version_for(OffsetFetchRequest.API_KEY, maximum=7)

        answer = await session.request(OffsetFetchRequest(group_id=group, topics=None), version)

        assert answer.error_code == ErrorCode.NONE
        assert [a.error_code for a in answers] == [ErrorCode.NOT_COORDINATOR, ErrorCode.NONE]
        await session.aclose()
    finally:
        stop_broker_process(cluster)
